"""De-duplication of a corpus: every pair above a threshold, then clusters of duplicates.

Pairs come from a k-nearest-neighbour search of every text against the corpus (exact or HNSW),
a chunk at a time, kept as three NumPy arrays — a million texts with a few million pairs fit
in a few hundred MB. Two ways to group them:

* ``components``: connected components of the duplicate graph. Complete, but a chain of
  near-duplicates (a ~ b ~ c) can join texts that are not similar themselves.
* ``communities``: tight groups. The text with the most duplicates becomes a centre and takes
  its not-yet-grouped neighbours, then the next; every member is above the threshold *to its
  centre*, so clusters do not chain.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components

from ..atomic import atomic_file
from ..errors import ConfigError
from ..model import SiameseModel
from ..progress import tqdm
from .index import KINDS, faiss_index, fill_index, require_cosine

CLUSTERINGS = ("components", "communities")


@dataclass
class DuplicatePairs:
    """Pairs ``(first[n], second[n])`` with first < second, and their cosine similarity."""

    first: np.ndarray
    second: np.ndarray
    similarity: np.ndarray

    def __len__(self) -> int:
        return len(self.first)

    def __iter__(self):
        return zip(self.first.tolist(), self.second.tolist(), self.similarity.tolist())

    def graph(self, n: int) -> csr_matrix:
        """The symmetric n × n similarity graph of the pairs."""
        rows = np.concatenate([self.first, self.second])
        cols = np.concatenate([self.second, self.first])
        sims = np.concatenate([self.similarity, self.similarity])
        return coo_matrix((sims, (rows, cols)), shape=(n, n)).tocsr()


EXACT_UP_TO = 50_000  # kind="auto": exact neighbours up to this many texts, IVF beyond


def duplicate_pairs(vectors: np.ndarray, threshold: float, *, k: int = 20, kind: str = "auto",
                    chunk: int = 8192, progress: bool = False) -> DuplicatePairs:
    """Every pair of rows of ``vectors`` whose cosine is above ``threshold`` among each row's ``k`` neighbours.

    A pair is kept if either text has the other among its ``k`` nearest neighbours, so with
    ``k >= len(vectors)`` and ``kind="flat"`` the result is exact. ``kind="auto"`` is exact up
    to 50,000 texts and IVF (approximate, near-linear) beyond.
    """
    n = len(vectors)
    index = pair_index(vectors, k=k, kind=kind)
    found = [neighbour_pairs(index, vectors[start : start + chunk], start, n, k, threshold)
             for start in tqdm(range(0, n, chunk), desc="dedupe", unit="chunk", disable=not progress)]
    return merge_pairs(found, n)


def pair_index(vectors: np.ndarray, *, k: int = 20, kind: str = "auto"):
    """The FAISS index the pair search queries (``auto``: exact up to 50,000 texts, IVF beyond)."""
    if kind == "auto":
        kind = "flat" if len(vectors) <= EXACT_UP_TO else "ivf"
    return fill_index(faiss_index(kind, vectors.shape[1], size=len(vectors), ef_search=max(64, 2 * k)), vectors)


def neighbour_pairs(index, queries: np.ndarray, start: int, n: int, k: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (as keys ``min·n + max``) and similarities of rows ``start..`` (``queries``) with
    their ``k`` nearest neighbours above ``threshold``: one chunk of the search, on any engine."""
    k = min(k + 1, n)  # + the text itself
    scores, rows = index.search(queries, k)
    i = np.repeat(np.arange(start, start + len(rows), dtype=np.int64), k)
    j, s = rows.ravel().astype(np.int64), scores.ravel()
    keep = (s > threshold) & (j >= 0) & (j != i)
    i, j, s = i[keep], j[keep], s[keep]
    return np.minimum(i, j) * n + np.maximum(i, j), s


def merge_pairs(found, n: int) -> DuplicatePairs:
    """The chunks' pairs, each pair once (found from both ends, or by two chunks)."""
    found = list(found)
    keys, first = np.unique(np.concatenate([f[0] for f in found] or [np.empty(0, np.int64)]), return_index=True)
    sims = np.concatenate([f[1] for f in found] or [np.empty(0, np.float32)])[first]
    return DuplicatePairs(keys // n, keys % n, sims.astype(np.float32))


def components(n: int, pairs: DuplicatePairs, *, min_size: int = 2) -> list[list[int]]:
    """Connected components of the duplicate graph, largest first; groups under ``min_size`` left out."""
    _, labels = connected_components(pairs.graph(n), directed=False)
    return _groups(labels, np.bincount(labels) >= min_size)


def communities(n: int, pairs: DuplicatePairs, *, min_size: int = 2) -> list[list[int]]:
    """Tight clusters: each is a centre (listed first) and neighbours above the threshold to it.

    Centres are taken in order of how many duplicates they have; a text joins one cluster at
    most. Groups smaller than ``min_size`` are left out.
    """
    graph = pairs.graph(n)
    degree = np.diff(graph.indptr)
    grouped = np.zeros(n, dtype=bool)
    found = []
    for centre in np.argsort(-degree, kind="stable"):
        if degree[centre] + 1 < min_size:
            break
        if grouped[centre]:
            continue
        neighbours = graph.indices[graph.indptr[centre] : graph.indptr[centre + 1]]
        members = np.concatenate([[centre], np.sort(neighbours[~grouped[neighbours]])])
        if len(members) >= min_size:
            grouped[members] = True
            found.append(members.tolist())
    return sorted(found, key=lambda g: -len(g))


def _groups(labels: np.ndarray, keep: np.ndarray) -> list[list[int]]:
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    groups = [g.tolist() for g in np.split(order, cuts) if keep[labels[g[0]]]]
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def dedupe(model: SiameseModel, texts: Sequence[str], out: str | os.PathLike, *, threshold: float | None = None,
           k: int = 20, kind: str = "auto", clustering: str = "components", min_size: int = 2,
           progress: bool = False, engine=None) -> dict:
    """Group near-duplicate texts into clusters and write them as JSON lines (atomically).

    ``engine``: where the encoding and pair search run (default: this process), e.g. a
    :class:`siamese.ray_engine.RayEngine`; the clustering is the same either way.

    Each line: ``{"cluster": n, "size": s, "members": [{"row", "text"}...]}``, largest first; with
    ``clustering="communities"`` the first member is the cluster's centre.
    """
    if clustering not in CLUSTERINGS:
        raise ConfigError(f"unknown clustering {clustering!r}; choose one of: {', '.join(CLUSTERINGS)}")
    kinds = [k for k in KINDS if k != "ondisk"]  # the pair search's index lives in memory
    if kind not in ("auto", *kinds):  # checked before the (long) encoding
        raise ConfigError(f"unknown index kind {kind!r}; choose one of: auto, {', '.join(kinds)}")
    require_cosine(model)
    t = model.threshold if threshold is None else threshold
    if engine is None:
        vectors = model.encode(list(texts), progress=progress)
        pairs = duplicate_pairs(vectors, t, k=k, kind=kind, progress=progress)
    else:  # e.g. siamese.ray_engine.RayEngine: the encoding and the pair search on a cluster
        vectors = engine.encode(model, texts)
        pairs = engine.duplicate_pairs(vectors, t, k=k, kind=kind)
    group = components if clustering == "components" else communities
    groups = group(len(texts), pairs, min_size=min_size)
    with atomic_file(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for n, g in enumerate(groups):
            members = [{"row": r, "text": texts[r]} for r in g]
            f.write(json.dumps({"cluster": n, "size": len(g), "members": members}, ensure_ascii=False) + "\n")
    return {"texts": len(texts), "pairs": len(pairs), "clusters": len(groups), "clustering": clustering,
            "clustered_texts": sum(len(g) for g in groups), "threshold": t, "out": str(out)}
