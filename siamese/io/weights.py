"""Reading a folder's ``*.safetensors`` weights safely: the header (names, dtypes, shapes) is read
and checked against the shapes the config asks for before a single tensor is allocated, and
tensors holding NaN or infinity are refused."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch.overrides import TorchFunctionMode

_MAX_HEADER = 100 << 20


def read_header(file: Path, error: type[Exception]) -> dict[str, tuple[int, ...]]:
    """``{tensor name: shape}`` from a safetensors file's header; a one-line ``error`` when the
    header is damaged or its tensors do not fit in the file."""
    try:
        size = file.stat().st_size
        with open(file, "rb") as f:
            head = f.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 0 < n <= min(_MAX_HEADER, size - 8):
                raise error(f"{file}: not a safetensors file (header length {n})")
            header = json.loads(f.read(n))
    except (ValueError, RecursionError):
        raise error(f"{file}: not a safetensors file (unreadable header)") from None
    except OSError as e:
        raise error(f"{file}: cannot read ({e.strerror or e})") from None
    if not isinstance(header, dict):
        raise error(f"{file}: not a safetensors file (header is not an object)")
    shapes = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (
            not isinstance(shape, list)
            or not all(isinstance(d, int) and d >= 0 for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= size - 8 - n
        ):
            raise error(f"{file}: tensor {name!r} has a damaged entry in the header")
        shapes[name] = tuple(shape)
    return shapes


def check_shapes(
    file: Path,
    found: dict[str, tuple[int, ...]],
    expected: dict[str, tuple[int, ...]],
    error: type[Exception],
    config: str = "config.json",
) -> None:
    """Refuse weights whose names or shapes differ from what the config builds."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        what = (
            (f"missing {', '.join(map(repr, missing[:3]))}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unexpected {', '.join(map(repr, extra[:3]))}" if extra else "")
        )
        raise error(f"{file}: weights do not fit the config ({what})")
    for name, shape in expected.items():
        if found[name] != shape:
            raise error(
                f"{file}: weights do not fit the config (tensor {name!r} has shape {list(found[name])}, "
                f"{config} asks for {list(shape)})"
            )


def expected_shapes(modules: dict[str, torch.nn.Module]) -> dict[str, tuple[int, ...]]:
    """``{prefix + name: shape}`` of modules built on the meta device (nothing allocated)."""
    return {prefix + k: tuple(v.shape) for prefix, module in modules.items() for k, v in module.state_dict().items()}


def load_finite(file: Path, error: type[Exception]) -> dict[str, torch.Tensor]:
    """The tensors of ``file``; a one-line ``error`` if it is damaged or any holds NaN or infinity."""
    try:
        state = load_file(str(file))
    except (SafetensorError, OSError, RuntimeError) as e:
        raise error(f"{file}: unreadable weights ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    for name, tensor in state.items():
        if not tensor.is_floating_point() or not tensor.numel():
            continue
        # NaN and infinity carry through a sum (a float64 sum of float32 values cannot overflow), so a
        # finite sum clears the tensor in one pass, without a mask as large as the weights.
        if not bool(torch.isfinite(tensor.sum(dtype=torch.float64))):
            bad = int((~torch.isfinite(tensor)).sum())
            raise error(f"{file}: tensor {name!r} holds {bad} NaN or infinite value{'s' if bad > 1 else ''}")
    return state


_RANDOM_FILLS = frozenset({"normal_", "uniform_", "bernoulli_", "exponential_", "random_", "cauchy_", "log_normal_"})


class _SkipInit(TorchFunctionMode):
    """Within it, ``torch.nn.init`` functions return their tensor untouched: a meta tensor has no
    values to fill, and filling one runs PyTorch's Python decompositions, whose first use imports
    torch._dynamo (1-2 s of every model load on 2 cores). Modes are per thread."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs.get("tensor")
        if getattr(func, "__name__", None) in _RANDOM_FILLS and args and getattr(args[0], "is_meta", False):
            return args[0]  # an encoder's own random start (weight.normal_()), on a meta tensor
        return func(*args, **kwargs)


def meta_build(build):
    """``build()`` on the meta device: shapes only, so a config asking for 10^15 parameters costs nothing."""
    with torch.device("meta"), _SkipInit():
        return build()
