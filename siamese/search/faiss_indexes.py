"""Empty FAISS indexes of each kind (flat, hnsw, ivf, ondisk), below the saved index
(index.py) and its on-disk lists (ondisk.py), which both build them."""

from __future__ import annotations

import math

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
