"""De-duplication: every pair above a threshold (within a corpus or against a reference), then clusters.

Pairs come from a k-nearest-neighbour search of every text against the corpus (exact up to
EXACT_UP_TO texts, else IVF, or the index kind asked for),
a chunk at a time, kept as three NumPy arrays — a million texts with a few million pairs fit
in a few hundred MB. Two ways to group them:

* ``components``: connected components of the duplicate graph. Complete, but a chain of
  near-duplicates (a ~ b ~ c) can join texts that are not similar themselves.
* ``greedy`` (the default, as SemHash does): records are taken in order; each joins the cluster
  of the earlier *kept* record it is most similar to, if it is a duplicate of one, or is kept.
  Every member is above the threshold to its kept record, so clusters do not chain, and the kept
  record is the first of its cluster in the input.
* ``communities``: tight groups. The text with the most duplicates becomes a centre and takes
  its not-yet-grouped neighbours, then the next; every member is above the threshold *to its
  centre*, so clusters do not chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import ConfigError
from ..io.progress import tqdm
from .index import KINDS, faiss_index, fill_index

CLUSTERINGS = ("greedy", "components", "communities")
DEFAULT_CLUSTERING = "greedy"


@dataclass
class DuplicatePairs:
    """Pairs ``(first[n], second[n])`` and their cosine similarity: within one corpus first < second;
    against a reference, first is the new text's row and second the reference's."""

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

    def above(self, threshold: float) -> DuplicatePairs:
        """The pairs whose similarity is above ``threshold``."""
        keep = self.similarity > threshold
        return DuplicatePairs(self.first[keep], self.second[keep], self.similarity[keep])

    @classmethod
    def concat(cls, *parts: DuplicatePairs) -> DuplicatePairs:
        return cls(*(np.concatenate([getattr(p, a) for p in parts]) for a in ("first", "second", "similarity")))


EXACT_UP_TO = 50_000  # kind="auto": exact neighbours up to this many texts, IVF beyond


def check_kind(kind: str) -> str:
    """``kind`` if it is an index kind or auto (checked before any long encoding)."""
    kinds = [k for k in KINDS if k != "ondisk"]  # the pair search's index lives in memory
    if kind not in ("auto", *kinds):
        raise ConfigError(f"unknown index kind {kind!r}; choose one of: auto, {', '.join(kinds)}")
    return kind


def vector_index(vectors: np.ndarray, kind: str = "auto", *, k: int = 20):
    """A FAISS index of ``vectors``: ``auto`` is exact up to 50,000 vectors and IVF beyond."""
    if check_kind(kind) == "auto":
        kind = "flat" if len(vectors) <= EXACT_UP_TO else "ivf"
    return fill_index(faiss_index(kind, vectors.shape[1], size=len(vectors), ef_search=max(64, 2 * k)), vectors)


def neighbours(
    index, queries: np.ndarray, k: int, threshold: float, *, chunk: int = 8192, progress: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(query rows, index rows, similarities)`` of each query's ``k`` nearest neighbours above ``threshold``,
    a chunk of queries at a time."""
    with tqdm(total=len(queries), desc="neighbours", unit="text", disable=not progress) as bar:
        for start in range(0, len(queries), chunk):
            scores, rows = index.search(queries[start : start + chunk], k)
            i = np.repeat(np.arange(start, start + len(rows), dtype=np.int64), k)
            j, s = rows.ravel().astype(np.int64), scores.ravel()
            keep = (s > threshold) & (j >= 0)
            bar.update(len(rows))
            yield i[keep], j[keep], s[keep]


def duplicate_pairs(
    vectors: np.ndarray, threshold: float, *, k: int = 20, kind: str = "auto", chunk: int = 8192, progress: bool = False
) -> DuplicatePairs:
    """Every pair of rows of ``vectors`` whose cosine is above ``threshold`` among each row's ``k`` neighbours.

    A pair is kept if either text has the other among its ``k`` nearest neighbours, so with
    ``k >= len(vectors)`` and ``kind="flat"`` the result is exact. ``kind="auto"`` is exact up
    to 50,000 texts and IVF (approximate, near-linear) beyond.
    """
    n = len(vectors)
    index = vector_index(vectors, kind, k=k)
    return merge_pairs(
        [
            pair_keys(i, j, s, n)
            for i, j, s in neighbours(index, vectors, min(k + 1, n), threshold, chunk=chunk, progress=progress)
        ],
        n,
    )  # k + itself


def pair_keys(i: np.ndarray, j: np.ndarray, s: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A chunk of neighbours (rows i, j of one corpus of n) as pair keys ``min·n + max`` and their
    similarities, each text with itself left out: what any engine's chunk of the search returns."""
    other = j != i
    i, j = i[other], j[other]
    return np.minimum(i, j) * n + np.maximum(i, j), s[other]


def merge_pairs(found, n: int) -> DuplicatePairs:
    """The chunks' pairs, each pair once (found from both ends, or by two chunks)."""
    found = list(found)
    keys, first = np.unique(np.concatenate([f[0] for f in found] or [np.empty(0, np.int64)]), return_index=True)
    sims = np.concatenate([f[1] for f in found] or [np.empty(0, np.float32)])[first]
    return DuplicatePairs(keys // n, keys % n, sims.astype(np.float32))


def cross_pairs(
    queries: np.ndarray, index, threshold: float, *, k: int = 20, chunk: int = 8192, progress: bool = False
) -> DuplicatePairs:
    """Pairs ``(query row, indexed row)`` above ``threshold`` among each query's ``k`` nearest indexed vectors."""
    found = list(neighbours(index, queries, min(k, index.ntotal), threshold, chunk=chunk, progress=progress))
    empty = np.empty(0, np.int64)
    return DuplicatePairs(
        np.concatenate([f[0] for f in found] or [empty]),
        np.concatenate([f[1] for f in found] or [empty]),
        np.concatenate([f[2] for f in found] or [np.empty(0, np.float32)]).astype(np.float32),
    )


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


def greedy(n: int, pairs: DuplicatePairs, *, min_size: int = 2) -> list[list[int]]:
    """Clusters that do not chain: rows in order, each joins the most similar earlier kept row it
    has a pair with, or is kept. Each cluster is its kept row (listed first) and its members."""
    graph = pairs.graph(n)
    owner = np.arange(n)
    kept = np.ones(n, dtype=bool)
    for row in np.flatnonzero(np.diff(graph.indptr)).tolist():
        lo, hi = graph.indptr[row], graph.indptr[row + 1]
        others, sims = graph.indices[lo:hi], graph.data[lo:hi]
        earlier = (others < row) & kept[others]
        if earlier.any():
            owner[row] = others[earlier][int(np.argmax(sims[earlier]))]
            kept[row] = False
    return _groups(owner, np.bincount(owner, minlength=n) >= min_size)


def check_clustering(clustering: str) -> str:
    if clustering not in CLUSTERINGS:
        raise ConfigError(f"unknown clustering {clustering!r}; choose one of: {', '.join(CLUSTERINGS)}")
    return clustering


def clusters(
    n: int, pairs: DuplicatePairs, clustering: str = DEFAULT_CLUSTERING, *, min_size: int = 2
) -> list[list[int]]:
    """Clusters by ``clustering``, each with a centre first: greedy's kept row, a community's own
    centre, or the component's member with the most duplicates (the earliest row on a tie)."""
    if check_clustering(clustering) == "communities":
        return communities(n, pairs, min_size=min_size)
    if clustering == "greedy":
        return greedy(n, pairs, min_size=min_size)
    degree = np.bincount(np.concatenate([pairs.first, pairs.second]), minlength=n)
    found = []
    for group in components(n, pairs, min_size=min_size):
        centre = group[int(np.argmax(degree[group]))]
        found.append([centre, *(x for x in group if x != centre)])
    return found


def _groups(labels: np.ndarray, keep: np.ndarray) -> list[list[int]]:
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    groups = [g.tolist() for g in np.split(order, cuts) if keep[labels[g[0]]]]
    return sorted(groups, key=lambda g: (-len(g), g[0]))
