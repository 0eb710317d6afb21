"""The C allocator's handling of big blocks (glibc only; elsewhere nothing is changed).

By default glibc serves a block above a moving threshold (128 KiB, rising to 32 MiB as mapped
blocks are freed) from its heap, and a heap holding blocks of many sizes keeps what it once held.
Training steps allocate activations of a different size every batch (texts of different lengths):
fine-tuning on 2,000 SemEval pairs peaked at 2.07-2.37 GB that way, 1.76 GB with blocks of 1 MiB
and more mapped on their own and given back when freed, for ~1/3 more time (page faults;
docs/benchmarks.md)."""

from __future__ import annotations

import ctypes
import functools

BIG_BLOCK = 1 << 20  # bytes
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


@functools.cache
def map_big_blocks(threshold: int = BIG_BLOCK) -> bool:
    """Blocks of ``threshold`` bytes and more, for the rest of this process, each mapped on its own
    and returned to the system when freed. True if the allocator took the setting (glibc)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own C library, as io.atomic's renameat2
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
