"""C++ loops for the training hot path (``kernels.cpp``), compiled on first use.

- ``lstm_forward`` / ``lstm_backward``: embedding → LSTM → mean as one training kernel on CPUs
  with native bfloat16 (see :mod:`siamese.encoders.fused_lstm`);
- ``lazy_adam_``: one Adam step over the rows of a sparse gradient in one pass
  (see :class:`siamese.optim.LazyAdam`).

Built with torch's extension builder (g++ and ninja; ~30 s once, then cached under
``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``), per instruction set rather
than ``-march=native``, so a cached build runs on any CPU of that set. Where the build fails (no
compiler, no headers) :func:`load` warns once and returns None, and every caller falls back to
PyTorch ops. ``SIAMESE_KERNELS=0`` in the environment turns the kernels off.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import threading
import warnings
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("kernels.cpp")
_COMMON_FLAGS = ["-O3", "-ffast-math", "-mrecip=all", "-fopenmp-simd"]
_ISA_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


def load():
    """The compiled kernels module, or None (turned off, or no build here)."""
    return None if os.environ.get("SIAMESE_KERNELS", "1") == "0" else _build()


@functools.cache
def _build():
    from torch.utils.cpp_extension import load as build

    isa = torch.backends.cpu.get_cpu_capability()
    isa = next((name for name in _ISA_FLAGS if isa.startswith(name)), "generic")
    if shutil.which("ninja") is None:  # the ninja package's binary, when the venv is not activated
        try:
            import ninja

            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass
    # a cached build loads in well under a second; say why the first one takes ~30 s
    notice = threading.Timer(2.0, lambda: print("siamese: compiling its C++ kernels (once, ~30 s) ...", file=sys.stderr))
    notice.start()
    try:
        return build(f"siamese_kernels_{isa.lower()}", [str(_SOURCE)], extra_cflags=_COMMON_FLAGS + _ISA_FLAGS.get(isa, []),
                     verbose=False)
    except Exception as e:  # no compiler, no headers: PyTorch ops still work
        lines = str(e).splitlines() or [type(e).__name__]
        reason = next((line for line in lines if "error" in line.lower() and "building extension" not in line), lines[-1])
        warnings.warn(f"siamese's C++ kernels are unavailable, training with PyTorch ops instead: {reason.strip()}",
                      stacklevel=3)
        return None
    finally:
        notice.cancel()
