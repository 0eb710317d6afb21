"""Numeric precision for training and encoding: bf16 where the CPU computes it natively.

``auto`` (the default) picks bf16 on CPUs with AVX512-BF16 or AMX and fp32 elsewhere (AVX2-only
CPUs emulate bf16 matmuls, slower than fp32); ``bf16`` on such a CPU is a clear error. Encoding
honours ``$SIAMESE_PRECISION`` (e.g. ``fp32`` to force exact vectors from every command).
"""

from __future__ import annotations

import contextlib
import os

import torch

from .errors import ConfigError

PRECISIONS = ("auto", "bf16", "fp32")
ENV = "SIAMESE_PRECISION"


def native_bf16() -> bool:
    """True where oneDNN runs bf16 matmuls natively (AVX512-BF16 / AMX)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def resolve_precision(precision: str, device: torch.device | None = None) -> str:
    """ "auto" → bf16 where the CPU computes it natively (AVX512-BF16 / AMX), else fp32. On a GPU
    (``device`` not the CPU) "auto" is fp32 and "bf16" is CUDA's own autocast."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if device is not None and device.type != "cpu":
        if precision == "bf16" and device.type != "cuda":
            raise ConfigError(f"precision 'bf16' is for the CPU or a CUDA GPU, not device {device.type!r}")
        return "bf16" if precision == "bf16" else "fp32"
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
    """A factory of the context that runs ops in ``precision`` (a resolved one: bf16 or fp32)."""
    if precision == "bf16":
        return lambda: torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext
