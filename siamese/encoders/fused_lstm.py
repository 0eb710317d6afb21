"""Embedding → LSTM as one training kernel for CPUs with native bfloat16 (``fused_lstm.cpp``).

Why: on a 2-core CPU the seed model's training step is mostly the LSTM. Two things make this
kernel faster than oneDNN's bf16 LSTM under autocast:

- the input projection ``x W_ihᵀ + b`` is computed once per *distinct* token of the batch, not
  once per position (a batch of 256 question pairs has ~5x fewer distinct words than
  positions), and its backward matmuls shrink the same way; the embedding gradient comes out
  already summed per row (one sparse row per distinct token for :class:`~siamese.optim.LazyAdam`);
- the step loop runs in C++ without the GIL, so the two length groups of a batch really run
  side by side on their worker threads.

The math is nn.LSTM's (gate order i, f, g, o; both biases) with bf16 matmul inputs, as under
bf16 autocast. The C++ source is compiled on first use with torch's extension builder (g++,
~25 s, cached); where that fails, training falls back to nn.LSTM with one warning.
``SIAMESE_FUSED_LSTM=0`` in the environment turns it off (nn.LSTM under bf16 autocast).
"""

from __future__ import annotations

import functools
import os
import shutil
import warnings
from pathlib import Path

import torch
from torch import nn

from ..text import PAD_ID

_SOURCE = Path(__file__).with_name("fused_lstm.cpp")
# Every CPU with native bf16 (AVX512-BF16, AMX) has these; no -march=native, so a cached build
# stays valid on any such CPU.
_CFLAGS = ["-O3", "-ffast-math", "-mrecip=all", "-fopenmp-simd", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"]


@functools.cache
def _extension():
    from torch.utils.cpp_extension import load

    if shutil.which("ninja") is None:  # the ninja package's binary, when the venv is not activated
        try:
            import ninja

            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass
    try:
        return load("siamese_fused_lstm", [str(_SOURCE)], extra_cflags=_CFLAGS, verbose=False)
    except Exception as e:  # no compiler, no headers: nn.LSTM still works
        lines = str(e).splitlines() or [type(e).__name__]
        reason = next((line for line in lines if "error" in line.lower() and "building extension" not in line), lines[-1])
        warnings.warn(f"fused LSTM kernel unavailable, training with nn.LSTM instead: {reason.strip()}", stacklevel=3)
        return None


def usable(lstm: nn.LSTM) -> bool:
    """True when this forward pass should take the fused kernel: training under bf16 autocast,
    a single-layer unidirectional batch-first LSTM with biases, and the kernel builds here."""
    return (torch.is_grad_enabled() and torch.is_autocast_enabled("cpu")
            and os.environ.get("SIAMESE_FUSED_LSTM", "1") != "0"
            and torch.get_autocast_dtype("cpu") == torch.bfloat16
            and lstm.num_layers == 1 and not lstm.bidirectional and lstm.batch_first and lstm.bias
            and lstm.proj_size == 0 and _extension() is not None)


def mean_states(embedding: nn.Embedding, lstm: nn.LSTM, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The (n, H) mean of ``lstm(embedding(ids))`` states over each text's real tokens, by the
    fused kernel (``ids`` right-padded, ``lengths`` >= 1)."""
    with torch.autocast("cpu", enabled=False):
        return _MeanLSTM.apply(embedding.weight, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0,
                               ids, lengths, embedding.sparse)


class _MeanLSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, w_ih, w_hh, b_ih, b_hh, ids, lengths, sparse):
        mean, *saved = _extension().forward(table.detach(), ids, lengths.long(), w_ih.detach(), w_hh.detach(),
                                            (b_ih + b_hh).detach())
        ctx.save_for_backward(*saved)
        ctx.table_shape, ctx.sparse = table.shape, sparse
        return mean

    @staticmethod
    def backward(ctx, d_mean):
        saved = ctx.saved_tensors
        tokens = saved[2]
        d_x, d_w_ih, d_w_hh, d_bias = _extension().backward(d_mean.contiguous(), *saved)
        d_x[tokens == PAD_ID] = 0  # the padding row never learns (nn.Embedding's padding_idx)
        if ctx.sparse:  # one row per distinct token
            d_table = torch.sparse_coo_tensor(tokens[None], d_x, ctx.table_shape, is_coalesced=True, check_invariants=False)
        else:
            d_table = torch.zeros(ctx.table_shape).index_copy_(0, tokens, d_x)
        return d_table, d_w_ih, d_w_hh, d_bias, d_bias, None, None, None
