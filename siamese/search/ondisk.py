"""An IVF index whose inverted lists stay on disk: search a corpus larger than memory.

Built in shards (FAISS's own recipe, ``faiss.contrib.ondisk``): the coarse quantizer (the lists'
centroids) is trained once on a sample of the vectors; each shard of rows is added to a copy of
that empty trained index and written alone (so shards can be built anywhere, one at a time or
on several nodes); ``merge_ondisk`` then joins the shards' lists into one ``lists.ivfdata`` file
(OnDiskInvertedLists). Opened with ``IO_FLAG_ONDISK_SAME_DIR``, the lists are memory-mapped: the
index in RAM is the centroids only (lists × dim floats), and a query reads the ``nprobe`` lists
it scans from the page cache or the disk.

The vectors come as an array that may itself be a memory map (an ``.npy`` from ``siamese encode``):
only the training sample and one shard are in memory at a time.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import sys
from pathlib import Path

import faiss
import numpy as np

from .faiss_indexes import faiss_index

LISTS_FILE = "lists.ivfdata"


def trained_ivf(vectors: np.ndarray, *, nprobe: int = 16, seed: int = 0):
    """An empty IVF index (~4·√n lists) whose centroids are trained on a sample of ``vectors``
    (64 rows per list: the whole corpus is never read for it)."""
    n = len(vectors)
    index = faiss_index("ivf", vectors.shape[1], size=n, nprobe=nprobe)
    sample = min(n, 64 * index.nlist)
    rows = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    index.train(np.ascontiguousarray(vectors[rows], dtype=np.float32))
    return index


def build_ondisk(
    vectors: np.ndarray, folder: str | Path, *, shard_size: int = 1_000_000, nprobe: int = 16, seed: int = 0
) -> str:
    """Write ``folder/index.faiss`` + ``folder/lists.ivfdata`` for ``vectors`` (ids = row numbers),
    adding ``shard_size`` rows at a time. ``folder`` must exist (e.g. an atomic temporary folder).
    Returns the index file's name."""
    folder = Path(folder)
    trained = trained_ivf(vectors, nprobe=nprobe, seed=seed)
    scratch = folder / "shards"
    scratch.mkdir()
    shards = []
    for start in range(0, len(vectors), shard_size):
        shard = faiss.clone_index(trained)
        block = np.ascontiguousarray(vectors[start : start + shard_size], dtype=np.float32)
        shard.add_with_ids(block, np.arange(start, start + len(block), dtype=np.int64))
        shards.append(str(scratch / f"shard{len(shards):05d}.index"))
        faiss.write_index(shard, shards[-1])
        del shard, block
    from faiss.contrib.ondisk import merge_ondisk

    with _stdout_to_stderr():
        merge_ondisk(trained, shards, str(folder / LISTS_FILE))
    faiss.write_index(trained, str(folder / "index.faiss"))
    shutil.rmtree(scratch)
    return "index.faiss"


def read_ondisk(path: str | Path, nprobe: int = 16):
    """Open an on-disk index: its inverted lists are memory-mapped from the ``lists.ivfdata`` beside it."""
    with _stdout_to_stderr():
        index = faiss.read_index(str(path), faiss.IO_FLAG_ONDISK_SAME_DIR)
    index.nprobe = nprobe
    return index


@contextlib.contextmanager
def _stdout_to_stderr():
    """FAISS's C++ prints progress notes (resizing, the lists file's new path) with printf: keep
    them off stdout, which holds the commands' results (--json)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C's own stdout buffer, before fd 1 is stdout again
        os.dup2(saved, 1)
        os.close(saved)
