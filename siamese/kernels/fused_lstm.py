"""Fused single-layer LSTM for CPUs with AVX512-BF16 (see lstm.cpp).

``FusedLSTM`` is a drop-in for ``nn.LSTM(input_size, hidden_size, batch_first=True)`` with the
same parameter names and shapes (state dicts are interchangeable). It always starts from a zero
state and returns ``(outputs, None)``; outputs are float32. GEMM operands are rounded to bf16
(fp32 accumulation, fp32 cell state and gate math) whether or not autocast is active, i.e. the
numerics of ``nn.LSTM`` under ``torch.autocast("cpu", dtype=torch.bfloat16)``.

``available()`` builds/loads the extension once (cached, never raises); when it returns False,
or for unsupported inputs, ``FusedLSTM`` falls back to the regular ATen LSTM.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from pathlib import Path

import torch
from torch import nn

_SRC = Path(__file__).with_name("lstm.cpp")
_lock = threading.Lock()
_ext = None
_tried = False
_error: str | None = None


def _cpu_ok() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512_bf16"))


def _build_dir() -> Path:
    root = os.environ.get("SIAMESE_KERNEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "siamese_kernels"
    )
    tag = f"torch{torch.__version__.replace('+', '_')}"
    return Path(root) / tag / "fused_lstm"


def _load():
    global _ext, _tried, _error
    with _lock:
        if _tried:
            return _ext
        _tried = True
        if os.environ.get("SIAMESE_DISABLE_FUSED_LSTM"):
            _error = "disabled by SIAMESE_DISABLE_FUSED_LSTM"
            return None
        if not _cpu_ok():
            _error = "CPU lacks AVX512-BF16"
            return None
        try:
            from torch.utils.cpp_extension import load

            build = _build_dir()
            build.mkdir(parents=True, exist_ok=True)
            _ext = load(
                name="siamese_fused_lstm",
                sources=[str(_SRC)],
                build_directory=str(build),
                extra_cflags=["-O3", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mfma",
                              "-fopenmp"],
                extra_ldflags=["-fopenmp"],
                verbose=False,
            )
        except Exception as exc:  # noqa: BLE001 - any build/load failure means "not available"
            _error = f"{type(exc).__name__}: {exc}"
            _ext = None
        return _ext


def available() -> bool:
    """True if the native kernel could be built and loaded (cached; never raises)."""
    try:
        return _load() is not None
    except Exception:  # noqa: BLE001
        return False


def load_error() -> str | None:
    return _error


class _FusedLSTMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_ih, w_hh, b_ih, b_hh):
        ext = _ext
        bias = b_ih.detach().float() + b_hh.detach().float()
        out, xh, saved = ext.forward(x.detach(), w_ih.detach(), w_hh.detach(), bias)
        ctx.save_for_backward(xh, saved, w_ih, w_hh)
        ctx.x_dtype = x.dtype
        return out

    @staticmethod
    def backward(ctx, dout):
        xh, saved, w_ih, w_hh = ctx.saved_tensors
        dx, dw_ih, dw_hh, db = _ext.backward(dout, xh, saved, w_ih.detach(), w_hh.detach())
        return (dx.to(ctx.x_dtype), dw_ih.to(w_ih.dtype), dw_hh.to(w_hh.dtype), db.to(w_ih.dtype),
                db.to(w_hh.dtype))


class FusedLSTM(nn.Module):
    """Single-layer, unidirectional, batch_first LSTM with a fused AVX512-BF16 kernel."""

    def __init__(self, input_size: int, hidden_size: int, batch_first: bool = True, bias: bool = True):
        super().__init__()
        if not batch_first or not bias:
            raise ValueError("FusedLSTM supports batch_first=True, bias=True only")
        self.input_size, self.hidden_size = input_size, hidden_size
        self.batch_first = True
        self.weight_ih_l0 = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh_l0 = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias_ih_l0 = nn.Parameter(torch.empty(4 * hidden_size))
        self.bias_hh_l0 = nn.Parameter(torch.empty(4 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:  # same as nn.LSTM
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            nn.init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, batch_first=True"

    def _supported(self, x: torch.Tensor) -> bool:
        return (
            x.device.type == "cpu"
            and x.dim() == 3
            and x.dtype in (torch.float32, torch.bfloat16)
            and self.input_size % 16 == 0
            and self.hidden_size % 16 == 0
            and available()
        )

    def forward(self, x: torch.Tensor, hx=None):
        if hx is not None:
            raise ValueError("FusedLSTM always starts from a zero state (hx must be None)")
        w = (self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
        if self._supported(x):
            return _FusedLSTMFunction.apply(x, *w), None
        out, _, _ = torch._VF.lstm(x, _zero_state(x, self.hidden_size), list(w), True, 1, 0.0,
                                   self.training, False, True)
        return out, None


def _zero_state(x: torch.Tensor, hidden: int):
    z = x.new_zeros(1, x.shape[0], hidden)
    return (z, z)


__all__ = ["FusedLSTM", "available", "load_error"]
