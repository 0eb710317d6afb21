"""Embedding → LSTM → mean as one training kernel (``siamese/runtime/kernels.cpp``) on CPUs with
native bfloat16.

Why: on a 2-core CPU the default model's training step is mostly the LSTM, and nn.LSTM (oneDNN)
under bf16 autocast does work this model does not need:

- the input projection ``x W_ihᵀ + b`` is computed once per *distinct* token of the batch, not
  once per position (256 question pairs hold ~5x fewer distinct words than positions), and its
  backward matmuls shrink the same way; the embedding gradient comes out summed per row;
- rows are taken longest first, so no step computes padding, and the mean over real tokens is
  taken inside the loop;
- the step loop runs in C++ without the GIL, so the two length groups of a batch really run side
  by side on their worker threads.

The math is nn.LSTM's (gate order i, f, g, o; both biases) with bf16 matmul operands and fp32
accumulation and gate math, as under bf16 autocast. fp32 training and inference use nn.LSTM (a
fp32 variant of the kernel trained only ~6 % faster).
"""

from __future__ import annotations

import torch
from torch import nn

from ...data.vocabulary import PAD_ID
from ...runtime import kernels


def usable(lstm: nn.LSTM) -> bool:
    """True when this forward pass should take the fused kernel: training under bf16 autocast,
    a single-layer unidirectional batch-first LSTM with biases, and the kernels build here."""
    return (
        torch.is_grad_enabled()
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
        and lstm.num_layers == 1
        and not lstm.bidirectional
        and lstm.batch_first
        and lstm.bias
        and lstm.proj_size == 0
        and kernels.load() is not None
    )


def mean_states(embedding: nn.Embedding, lstm: nn.LSTM, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The (n, H) mean of ``lstm(embedding(ids))`` states over each text's real tokens, by the
    fused kernel (``ids`` right-padded, ``lengths`` >= 1)."""
    with torch.autocast("cpu", enabled=False):
        return _MeanLSTM.apply(
            embedding.weight,
            lstm.weight_ih_l0,
            lstm.weight_hh_l0,
            lstm.bias_ih_l0,
            lstm.bias_hh_l0,
            ids,
            lengths,
            embedding.sparse,
        )


class _MeanLSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, w_ih, w_hh, b_ih, b_hh, ids, lengths, sparse):
        bias = (b_ih + b_hh).detach()
        mean, *saved = kernels.load().lstm_forward(
            table.detach(), ids, lengths.long(), w_ih.detach(), w_hh.detach(), bias
        )
        ctx.save_for_backward(*saved)
        ctx.table_shape, ctx.sparse = table.shape, sparse
        return mean

    @staticmethod
    def backward(ctx, d_mean):
        saved = ctx.saved_tensors
        tokens = saved[2]
        d_x, d_w_ih, d_w_hh, d_bias = kernels.load().lstm_backward(d_mean.contiguous(), *saved)
        d_x[tokens == PAD_ID] = 0  # the padding row never learns (nn.Embedding's padding_idx)
        if ctx.sparse:  # one row per distinct token
            d_table = torch.sparse_coo_tensor(
                tokens[None], d_x, ctx.table_shape, is_coalesced=True, check_invariants=False
            )
        else:
            d_table = torch.zeros(ctx.table_shape).index_copy_(0, tokens, d_x)
        return d_table, d_w_ih, d_w_hh, d_bias, d_bias, None, None, None
