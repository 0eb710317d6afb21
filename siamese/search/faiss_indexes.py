"""Empty FAISS indexes of each kind (flat, hnsw, ivf, ondisk), below the saved index
(index.py) and its on-disk lists (ondisk.py), which both build them."""

from __future__ import annotations

import errno
import math
import os

import faiss

from ..errors import ConfigError

KINDS = ("flat", "hnsw", "ivf", "ondisk")  # ondisk: IVF with its lists on disk (see ondisk.py)


def ivf_lists(size: int) -> int:
    """Inverted lists for ``size`` vectors: ~4·√n, with at least 39 training points per list."""
    return max(1, min(int(4 * math.sqrt(size)), size // 39))


def faiss_index(kind: str, dim: int, *, size: int = 0, hnsw_m: int = 32, ef_search: int = 128, nprobe: int = 16):
    """An empty inner-product (= cosine on unit vectors) FAISS index.

    ``flat`` is exact; ``hnsw`` is a graph, slow to build but the fastest single queries;
    ``ivf`` clusters the vectors into lists and scans ``nprobe`` of them per query — quick to
    build, best for all-against-all de-duplication. ``ivf`` must be trained (see
    :func:`fill_index`); ``size`` is the expected number of vectors.
    """
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = ef_search
        return index
    if kind in ("ivf", "ondisk"):  # ondisk: the same IVF, its lists moved to disk when saved
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, ivf_lists(size), faiss.METRIC_INNER_PRODUCT)
        index.nprobe = nprobe
        index.cp.max_points_per_centroid = (
            64  # k-means on a sample: 4x quicker to train than FAISS's 256 points per list
        )
        return index
    raise ConfigError(f"unknown index kind {kind!r}; choose one of: {', '.join(KINDS)}")


def write_index(index, path: str | os.PathLike) -> None:
    """``faiss.write_index`` through a Python file, so that every write, the flush, the fsync and
    the close raise an OSError when they fail (a full disk, a file-size limit): FAISS's own file
    writer may print "close error" and return, leaving a short file. The file's size is then
    checked against what was written."""
    written = 0

    def write(chunk: bytes) -> int:
        nonlocal written
        n = f.write(chunk)
        written += n
        return n

    try:
        with open(path, "wb") as f:
            faiss.write_index(index, faiss.PyCallbackIOWriter(write))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None  # a failed write does not name its file
    size = os.stat(path).st_size
    if size != written:
        raise OSError(errno.EIO, f"wrote {written:,} bytes but the file holds {size:,}", str(path))
