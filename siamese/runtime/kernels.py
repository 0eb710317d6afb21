"""C++ loops for the training hot path (``kernels.cpp``), compiled on first use.

- ``lstm_forward`` / ``lstm_backward``: embedding → LSTM → mean as one training kernel on CPUs
  with native bfloat16 (see :mod:`siamese.models.encoders.fused_lstm`);
- ``lazy_adam_``: one Adam step over the rows of a sparse gradient in one pass
  (see :class:`siamese.training.optim.LazyAdam`).

Built with torch's extension builder (g++ and ninja; ~30 s once, then cached under
``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``), per instruction set rather
than ``-march=native``, so a cached build runs on any CPU of that set. Where the build fails (no
compiler, no headers) :func:`load` warns once and returns None, and every caller falls back to
PyTorch ops. ``SIAMESE_KERNELS=0`` in the environment turns the kernels off.

The build is cached under a name keyed by the source's hash, the torch version, the Python
version, the instruction set, the flags and where the source and torch live, so checkouts and
venvs never rebuild over each other. torch guards a build with a plain ``lock`` file that a
killed build leaves behind, and then every later run waits on it forever; so builders of one
cache entry first take an ``flock`` beside it (released by the kernel when the process dies):
holding it, any torch ``lock`` file there is stale and removed. A build that cannot get the lock
within ``$SIAMESE_KERNELS_TIMEOUT`` seconds (default 600) warns and falls back to PyTorch ops.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import threading
import warnings
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("kernels.cpp")
# Approximate reciprocals for division only: an approximate square root (x * rsqrt(x)) turns a
# denormal x into NaN (rsqrt reads it as 0 -> inf), and Adam's second moment of a gradient near
# 1e-20 is denormal; that NaN'd two-worker training on an AVX2 host.
_COMMON_FLAGS = ["-O3", "-ffast-math", "-mrecip=all,!sqrt,!vec-sqrt", "-fopenmp-simd"]
_ISA_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


# The build's ninja file names the source file and torch's headers by absolute path: two
# checkouts or two venvs sharing one build folder would each find it dirty and recompile.
_WHERE = f"{_SOURCE.resolve()}|{Path(torch.__file__).resolve().parent}"


def cache_name(source: bytes, isa: str, torch_version: str = torch.__version__, where: str = _WHERE) -> str:
    """The cached build's name: what it was built from, for which torch, Python and instruction
    set, and where the source and torch live."""
    key = hashlib.sha256(
        b"\0".join(
            [
                source,
                torch_version.encode(),
                sys.version.split()[0].encode(),
                isa.encode(),
                " ".join(_COMMON_FLAGS + _ISA_FLAGS.get(isa, [])).encode(),
                where.encode(),
            ]
        )
    ).hexdigest()[:12]
    return f"siamese_kernels_{isa.lower()}_{key}"


def instruction_set() -> str:
    """The flag set this CPU gets: "AVX512", "AVX2" or "generic"."""
    capability = torch.backends.cpu.get_cpu_capability()
    return next((name for name in _ISA_FLAGS if capability.startswith(name)), "generic")


def this_build_name() -> str:
    """The cache name of this checkout's build on this CPU."""
    return cache_name(_SOURCE.read_bytes(), instruction_set())


def build_timeout() -> float:
    try:
        return float(os.environ.get("SIAMESE_KERNELS_TIMEOUT", "600"))
    except ValueError:
        return 600.0


def load():
    """The compiled kernels module, or None (turned off, or no build here)."""
    return None if os.environ.get("SIAMESE_KERNELS", "1") == "0" else _build()


@functools.cache
def _build():
    from torch.utils.cpp_extension import _get_build_directory
    from torch.utils.cpp_extension import load as build

    from ..errors import OutputError
    from ..io.atomic import target_lock
    from ..io.extras import install_hint

    isa = instruction_set()
    if shutil.which("ninja") is None:  # the ninja package's binary, when the venv is not activated
        try:
            import ninja

            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:  # the extra `kernels`; the build below then fails and PyTorch ops are used
            pass
    # a cached build loads in well under a second; say why the first one takes ~30 s
    notice = threading.Timer(
        2.0, lambda: print("siamese: compiling its C++ kernels (once, ~30 s) ...", file=sys.stderr)
    )
    notice.start()
    try:
        name = this_build_name()
        folder = Path(_get_build_directory(name, verbose=False))
        with target_lock(folder, timeout=build_timeout()):
            (folder / "lock").unlink(missing_ok=True)  # torch's, left by a killed build: no builder holds it now
            _forget_earlier_builds(name)
            return build(
                name,
                [str(_SOURCE)],
                extra_cflags=_COMMON_FLAGS + _ISA_FLAGS.get(isa, []),
                build_directory=str(folder),
                verbose=False,
            )
    except OutputError:
        warnings.warn(
            f"siamese's C++ kernels are still being built by another process after {build_timeout():g} s "
            "($SIAMESE_KERNELS_TIMEOUT); using PyTorch ops instead",
            stacklevel=3,
        )
        return None
    except Exception as e:  # no compiler, no headers: PyTorch ops still work
        lines = str(e).splitlines() or [type(e).__name__]
        reason = next(
            (line for line in lines if "error" in line.lower() and "building extension" not in line), lines[-1]
        )
        warnings.warn(
            f"siamese's C++ kernels are unavailable, training with PyTorch ops instead: {reason.strip()}"
            + ("" if shutil.which("ninja") else f" (no ninja: {install_hint('kernels')})"),
            stacklevel=3,
        )
        return None
    finally:
        notice.cancel()


def _forget_earlier_builds(name: str) -> None:
    """torch numbers a second build of one name in a process (``name_v1``) when anything differs,
    the build folder included, and writes that build's ninja file into the folder of ``name``:
    the next process, wanting ``name``, then recompiles (~30 s), and so on. Our name already
    encodes what decides the build, so each build starts as torch's first of that name."""
    try:
        from torch.utils.cpp_extension import JIT_EXTENSION_VERSIONER

        JIT_EXTENSION_VERSIONER.entries.pop(name, None)
    except (ImportError, AttributeError):  # another torch: its own numbering stays
        pass
