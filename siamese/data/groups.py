"""Connected groups of a pair graph (texts are nodes, labelled pairs are edges) and splits that keep
each group on one side: a held-out split or cross-validation folds in which no text of the
held-out pairs was seen in training, so a held-out score is not flattered by memorised texts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .pairs import Pairs


def pair_groups(text1: Sequence[str], text2: Sequence[str]) -> np.ndarray:
    """The connected group of each pair (an int per pair; pairs sharing a text share a group)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    index: dict[str, int] = {}
    a = np.fromiter((index.setdefault(t, len(index)) for t in text1), dtype=np.int64, count=len(text1))
    b = np.fromiter((index.setdefault(t, len(index)) for t in text2), dtype=np.int64, count=len(text2))
    n = len(index)
    graph = sp.coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    return connected_components(graph, directed=False)[1][a] if len(a) else np.zeros(0, dtype=np.int64)


def grouped_folds(groups: np.ndarray, k: int, *, seed: int = 0) -> list[np.ndarray]:
    """``k`` folds of pair positions, whole groups per fold: groups in a shuffled order, largest
    first, each dealt to the fold holding the fewest pairs so far (folds of near equal size)."""
    ids, sizes = np.unique(groups, return_counts=True)
    order = np.random.default_rng(seed).permutation(len(ids))
    order = order[np.argsort(-sizes[order], kind="stable")]
    folds: list[list[int]] = [[] for _ in range(k)]
    count = np.zeros(k)
    for g in order:
        f = int(np.argmin(count))
        folds[f].append(int(ids[g]))
        count[f] += sizes[g]
    return [np.flatnonzero(np.isin(groups, f)) for f in folds if f]


def grouped_split(pairs: Pairs, fraction: float, *, seed: int = 0) -> tuple[Pairs, Pairs]:
    """(held out, rest): about ``fraction`` of the pairs held out, whole groups of the pair graph
    on each side. Groups are dealt in a shuffled order until the held-out side is full; a group
    that would take it past one and a half times its share goes to the rest instead (so one
    large group never becomes the whole held-out side)."""
    groups = pair_groups(pairs.text1, pairs.text2)
    ids, sizes = np.unique(groups, return_counts=True)
    order = np.random.default_rng(seed).permutation(len(ids))
    target, taken, held = fraction * len(pairs), 0, []
    for g in order:
        if taken >= target:
            break
        if taken + sizes[g] > 1.5 * target:
            continue
        held.append(ids[g])
        taken += sizes[g]
    mask = np.isin(groups, held)
    return pairs.subset(np.flatnonzero(mask)), pairs.subset(np.flatnonzero(~mask))
