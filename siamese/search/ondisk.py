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
import errno
import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from ..errors import SearchIndexError
from .faiss_indexes import faiss_index, write_index

LISTS_FILE = "lists.ivfdata"
# The lists file's checksum is verified on every load up to this size; above it (a corpus larger
# than memory) its size and every list's bounds are still checked, but not each byte.
CHECKSUM_LIMIT = 1 << 30


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
        write_index(shard, shards[-1])
        del shard, block
    from faiss.contrib.ondisk import merge_ondisk

    lists = folder / LISTS_FILE
    # merge_ondisk writes the lists through a memory map: their blocks are taken first, so a full
    # disk or a file-size limit is an OSError here instead of a SIGBUS (or lost pages) mid-merge
    with open(lists, "wb"):
        pass
    preallocate(lists, len(vectors) * (trained.code_size + 8))  # a vector's code and its 64-bit id
    with _stdout_to_stderr():
        merge_ondisk(trained, shards, str(lists))
    write_index(trained, folder / "index.faiss")
    shutil.rmtree(scratch)
    with _stdout_to_stderr(silent=True):  # read back as a search would (every list in the file) before publishing
        check_bounds(
            faiss.read_index(str(folder / "index.faiss"), faiss.IO_FLAG_ONDISK_SAME_DIR), lists, lists.stat().st_size
        )
    return "index.faiss"


def preallocate(file: str | Path, size: int | None = None) -> None:
    """Take the disk blocks of ``file`` (``size`` bytes, default its size) now: writes through a
    memory map then cannot fail for want of space (where the file system can allocate ahead)."""
    fd = os.open(file, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size if size is None else size
        if size:
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise OSError(e.errno, e.strerror, str(file)) from None
    finally:
        os.close(fd)


SCRATCH_PREFIX = "siamese-ondisk-"


def scratch_folder() -> tempfile.TemporaryDirectory:
    """A folder in $TMPDIR for an on-disk build's vectors. Its process holds a lock on a file in it
    as long as it lives (the kernel drops it when the process dies, even by kill -9), so the
    folders of killed builds, whose lock nobody holds, are deleted here."""
    root = Path(tempfile.gettempdir())
    for old in root.glob(f"{SCRATCH_PREFIX}*"):
        _remove_if_stale(old)
    try:
        return _Scratch(prefix=SCRATCH_PREFIX)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(root)) from None


class _Scratch(tempfile.TemporaryDirectory):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lock_fd = os.open(Path(self.name) / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX)

    def cleanup(self) -> None:
        super().cleanup()
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def _remove_if_stale(folder: Path) -> None:
    try:
        if time.time() - folder.stat().st_mtime < 60:
            return  # perhaps being created: its lock may not be taken yet
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return  # not one of ours, another user's, or gone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)  # a live build holds it
        return
    shutil.rmtree(folder, ignore_errors=True)
    os.close(fd)


def read_ondisk(path: str | Path, nprobe: int = 16, meta: dict | None = None):
    """Open an on-disk index: its inverted lists are memory-mapped from the ``lists.ivfdata`` beside it,
    checked first (see :func:`check_lists`) against index.json's ``meta`` when given."""
    path = Path(path)
    size = check_lists(path.parent, meta or {})
    with _stdout_to_stderr():
        index = faiss.read_index(str(path), faiss.IO_FLAG_ONDISK_SAME_DIR)
    check_bounds(index, path.parent / LISTS_FILE, size)
    index.nprobe = nprobe
    return index


def lists_digest(file: Path) -> tuple[int, str]:
    """The size and SHA-256 of a lists file (recorded in index.json when the index is built)."""
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return file.stat().st_size, digest.hexdigest()


def check_lists(folder: Path, meta: dict) -> int:
    """Before FAISS memory-maps ``lists.ivfdata`` (a read past its end is a SIGBUS, not an error):
    it must be a file of the size, and checksum, index.json recorded. Returns its size."""
    lists = folder / LISTS_FILE
    try:
        size = os.stat(lists).st_size
    except FileNotFoundError:
        raise SearchIndexError(f"{lists}: missing (an on-disk index keeps its vectors there; rebuild it)") from None
    except OSError as e:
        raise SearchIndexError(f"{lists}: cannot read ({e.strerror or e})") from None
    if not lists.is_file():
        raise SearchIndexError(f"{lists}: not a file")
    expected = meta.get("lists_bytes")
    if expected is not None and size != expected:
        raise SearchIndexError(
            f"{lists}: {size:,} bytes, index.json records {expected:,} (truncated or replaced; rebuild the index)"
        )
    if meta.get("lists_sha256") and size <= CHECKSUM_LIMIT:
        try:
            digest = lists_digest(lists)[1]
        except OSError as e:
            raise SearchIndexError(f"{lists}: cannot read ({e.strerror or e})") from None
        if digest != meta["lists_sha256"]:
            raise SearchIndexError(
                f"{lists}: its checksum is not the one index.json records (damaged; rebuild the index)"
            )
    return size


def check_bounds(index, lists: Path, size: int) -> None:
    """Every inverted list read from index.faiss must lie inside the lists file (``size`` bytes)."""
    invlists = faiss.downcast_InvertedLists(faiss.extract_index_ivf(index).invlists)
    if not isinstance(invlists, faiss.OnDiskInvertedLists):
        raise SearchIndexError(f"{lists.parent / 'index.faiss'}: not an on-disk index (its lists are not on disk)")
    entry = invlists.code_size + 8  # a vector's code and its 64-bit id
    for i in range(invlists.nlist):
        one = invlists.lists.at(i)
        if one.size > one.capacity or one.offset + one.capacity * entry > size:
            raise SearchIndexError(
                f"{lists}: list {i} runs past the end of the file ({size:,} bytes; truncated? rebuild the index)"
            )


@contextlib.contextmanager
def _stdout_to_stderr(silent: bool = False):
    """FAISS's C++ prints progress notes (resizing, the lists file's new path) with printf: keep
    them off stdout, which holds the commands' results (--json); ``silent``: drop them."""
    sys.stdout.flush()
    saved = os.dup(1)
    if silent:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    else:
        os.dup2(2, 1)
    try:
        yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C's own stdout buffer, before fd 1 is stdout again
        os.dup2(saved, 1)
        os.close(saved)
