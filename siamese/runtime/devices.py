"""Which device a model runs on: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

``auto`` and ``cuda`` take a CUDA GPU (under torchrun or ``--nproc``, the worker's own ``cuda:LOCAL_RANK``),
else Apple's MPS, else the CPU. Asking for a device this machine does not have is a one-line
error, not a crash deep inside PyTorch. The CPU-only fast paths (bf16 autocast where the CPU has
it natively, the fused LSTM kernel, length groups on pinned threads) are chosen from the device:
see :func:`is_cpu`.
"""

from __future__ import annotations

import os
import re

import torch

from ..errors import ConfigError

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """The torch device ``spec`` names, checked to exist here. A ``torch.device("meta")`` object
    passes as it is: the tests run models there to catch tensors made on the wrong device."""
    if isinstance(spec, torch.device):
        if spec.type == "meta":
            return spec
        spec = str(spec)
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        return torch.device("mps") if _mps_available() else torch.device("cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "mps":
        if not _mps_available():
            raise ConfigError(
                "device 'mps' is not available here (no Apple GPU, or PyTorch built without MPS); "
                "use --device cpu or auto"
            )
        return torch.device("mps")
    match = re.fullmatch(r"cuda(?::(\d+))?", spec)
    if match is None:
        raise ConfigError(f"unknown device {spec!r}; choose one of: {', '.join(DEVICES)}")
    if not torch.cuda.is_available():
        raise ConfigError(
            f"device {spec!r} is not available: no CUDA GPU here (PyTorch {torch.__version__}); "
            "use --device cpu or auto"
        )
    # "cuda" without an index: the worker's own GPU in a run of several (one per GPU), else the first
    index = int(match.group(1)) if match.group(1) else int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
    if index >= torch.cuda.device_count():
        raise ConfigError(
            f"device {spec!r} is not available: this machine has {torch.cuda.device_count()} CUDA GPU(s) "
            f"(cuda:0..cuda:{torch.cuda.device_count() - 1})"
        )
    return torch.device("cuda", index)


def is_cpu(device: torch.device | None) -> bool:
    """The CPU fast paths (bf16 autocast on native-bf16 CPUs, the fused kernels, threaded length
    groups) apply only here."""
    return device is None or device.type == "cpu"


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``; to a CUDA GPU through pinned host memory, copied without waiting
    (the next kernel on the stream waits for it, not the host)."""
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def host_bytes(tensor: torch.Tensor) -> bytes:
    """A tensor's bytes wherever it lives (a GPU's tensor is copied to the host first): what the
    weight fingerprints hash."""
    return tensor.detach().cpu().contiguous().numpy().tobytes()


def synchronize(device: torch.device | None = None) -> None:
    """Wait for the GPU's queued work (timings); nothing on the CPU."""
    if device is None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    elif device.type == "cuda":
        torch.cuda.synchronize(device)
