"""Embedding → LSTM → mean as one training kernel (``fused_lstm.cpp``), in bf16 or fp32.

Why: on a 2-core CPU the seed model's training step is mostly the LSTM, and nn.LSTM (oneDNN)
does work this model does not need:

- the input projection ``x W_ihᵀ + b`` is computed once per *distinct* token of the batch, not
  once per position (256 question pairs hold ~5x fewer distinct words than positions), and its
  backward matmuls shrink the same way; the embedding gradient comes out summed per row;
- rows are taken longest first, so no step computes padding, and the mean over real tokens is
  taken inside the loop;
- the step loop runs in C++ without the GIL, so the two length groups of a batch really run side
  by side on their worker threads.

The math is nn.LSTM's (gate order i, f, g, o; both biases). Under bf16 autocast the matmul
operands are bf16 (as oneDNN's LSTM does under autocast); otherwise fp32. The C++ source is
compiled on first use with torch's extension builder (g++, ~30 s, cached per CPU instruction
set); where that fails, training uses nn.LSTM after one warning. ``SIAMESE_FUSED_LSTM=0`` in the
environment turns the kernel off. Inference (no gradients) always uses nn.LSTM.
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
_COMMON_FLAGS = ["-O3", "-ffast-math", "-mrecip=all", "-fopenmp-simd"]
# Per instruction set, not -march=native: a cached build then runs on any CPU of that set.
_ISA_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


@functools.cache
def _extension():
    from torch.utils.cpp_extension import load

    isa = torch.backends.cpu.get_cpu_capability()
    isa = next((name for name in _ISA_FLAGS if isa.startswith(name)), "generic")
    if shutil.which("ninja") is None:  # the ninja package's binary, when the venv is not activated
        try:
            import ninja

            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass
    try:
        return load(f"siamese_fused_lstm_{isa.lower()}", [str(_SOURCE)], extra_cflags=_COMMON_FLAGS + _ISA_FLAGS.get(isa, []),
                    verbose=False)
    except Exception as e:  # no compiler, no headers: nn.LSTM still works
        lines = str(e).splitlines() or [type(e).__name__]
        reason = next((line for line in lines if "error" in line.lower() and "building extension" not in line), lines[-1])
        warnings.warn(f"fused LSTM kernel unavailable, training with nn.LSTM instead: {reason.strip()}", stacklevel=3)
        return None


def kernel_precision(lstm: nn.LSTM) -> str | None:
    """Which fused kernel this forward pass should take — "bf16" under bf16 autocast, "fp32"
    without autocast — or None for nn.LSTM: inference, another autocast type, an LSTM shape the
    kernel does not cover (stacked, bidirectional, projected, no bias), or no kernel here."""
    if not torch.is_grad_enabled() or os.environ.get("SIAMESE_FUSED_LSTM", "1") == "0":
        return None
    if not (lstm.num_layers == 1 and not lstm.bidirectional and lstm.batch_first and lstm.bias and lstm.proj_size == 0):
        return None
    if torch.is_autocast_enabled("cpu"):
        precision = "bf16" if torch.get_autocast_dtype("cpu") == torch.bfloat16 else None
    else:
        precision = "fp32" if lstm.weight_hh_l0.dtype == torch.float32 else None
    return precision if precision and _extension() is not None else None


def mean_states(embedding: nn.Embedding, lstm: nn.LSTM, ids: torch.Tensor, lengths: torch.Tensor,
                precision: str) -> torch.Tensor:
    """The (n, H) mean of ``lstm(embedding(ids))`` states over each text's real tokens, by the
    fused kernel (``ids`` right-padded, ``lengths`` >= 1; ``precision`` "bf16" or "fp32")."""
    with torch.autocast("cpu", enabled=False):
        return _MeanLSTM.apply(embedding.weight, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0,
                               ids, lengths, embedding.sparse, precision)


class _MeanLSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, w_ih, w_hh, b_ih, b_hh, ids, lengths, sparse, precision):
        forward = getattr(_extension(), f"forward_{precision}")
        mean, *saved = forward(table.detach(), ids, lengths.long(), w_ih.detach(), w_hh.detach(), (b_ih + b_hh).detach())
        ctx.save_for_backward(*saved)
        ctx.table_shape, ctx.sparse, ctx.precision = table.shape, sparse, precision
        return mean

    @staticmethod
    def backward(ctx, d_mean):
        saved = ctx.saved_tensors
        tokens = saved[2]
        backward = getattr(_extension(), f"backward_{ctx.precision}")
        d_x, d_w_ih, d_w_hh, d_bias = backward(d_mean.contiguous(), *saved)
        d_x[tokens == PAD_ID] = 0  # the padding row never learns (nn.Embedding's padding_idx)
        if ctx.sparse:  # one row per distinct token
            d_table = torch.sparse_coo_tensor(tokens[None], d_x, ctx.table_shape, is_coalesced=True, check_invariants=False)
        else:
            d_table = torch.zeros(ctx.table_shape).index_copy_(0, tokens, d_x)
        return d_table, d_w_ih, d_w_hh, d_bias, d_bias, None, None, None, None
