"""Numeric precision for training and encoding: bf16 where the hardware computes it natively.

``auto`` (the default) picks bf16 on CPUs with AVX512-BF16 or AMX and fp32 elsewhere (AVX2-only
CPUs emulate bf16 matmuls, slower than fp32); ``bf16`` on such a CPU is a clear error. On a CUDA
GPU ``auto`` is mixed precision for the work that gains from it (transformers): bf16 autocast
where the GPU has bf16 (Ampere and later), else fp16 autocast, trained with a gradient scaler
(:func:`grad_scaler`). Encoding honours ``$SIAMESE_PRECISION`` (e.g. ``fp32`` to force exact
vectors from every command).
"""

from __future__ import annotations

import contextlib
import os

import torch

from ..errors import ConfigError

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
ENV = "SIAMESE_PRECISION"


def native_bf16() -> bool:
    """True where oneDNN runs bf16 matmuls natively (AVX512-BF16 / AMX)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cuda_mixed() -> str:
    """The CUDA GPU's mixed precision: bf16 where it has it, else fp16 (with a gradient scaler)."""
    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp16"


def resolve_precision(precision: str, device: torch.device | None = None, *, mixed_on_gpu: bool = True) -> str:
    """ "auto" → bf16 where the CPU computes it natively (AVX512-BF16 / AMX), else fp32. On a CUDA
    GPU "auto" is :func:`cuda_mixed` when ``mixed_on_gpu`` (the caller's work gains from it:
    transformers), else fp32; "bf16" and "fp16" are CUDA's own autocast there. Other GPUs (MPS): fp32."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if device is not None and device.type == "cuda":
        if precision == "auto":
            return cuda_mixed() if mixed_on_gpu else "fp32"
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            raise ConfigError("precision 'bf16' needs a GPU with bfloat16 (Ampere or later); use 'fp16' or 'auto'")
        return precision
    if precision == "fp16":
        where = "the CPU" if device is None or device.type == "cpu" else f"device {device.type!r}"
        raise ConfigError(f"precision 'fp16' is for CUDA GPUs, not {where}; use 'bf16', 'fp32' or 'auto'")
    if device is not None and device.type != "cpu":
        if precision == "bf16":
            raise ConfigError(f"precision 'bf16' is for the CPU or a CUDA GPU, not device {device.type!r}")
        return "fp32"
    native = native_bf16()
    if precision == "bf16" and not native:
        raise ConfigError(
            "precision 'bf16' needs a CPU with native bfloat16 (AVX512-BF16 or AMX); "
            "this one has none: use 'fp32' or 'auto'"
        )
    if precision == "auto":
        return "bf16" if native else "fp32"
    return precision


def default_precision() -> str:
    """The encoding precision asked for by ``$SIAMESE_PRECISION`` (default ``auto``), checked."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in PRECISIONS:
        raise ConfigError(f"${ENV} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


def autocast(precision: str, device_type: str = "cpu"):
    """A factory of the context that runs ops in ``precision`` (a resolved one: bf16, fp16 or fp32)."""
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return lambda: torch.autocast(device_type, dtype=dtype)
    return contextlib.nullcontext


def grad_scaler(precision: str, device: torch.device | None):
    """fp16 training's loss scaler (fp16 gradients underflow without it); None for the others."""
    if precision != "fp16" or device is None or device.type != "cuda":
        return None
    return torch.amp.GradScaler("cuda")
