"""Retrieval quality: how often a query's known duplicate is among its nearest indexed texts."""

from __future__ import annotations

from collections.abc import Sequence

from .index import DuplicateIndex


def retrieval_metrics(
    index: DuplicateIndex, queries: Sequence[str], targets: Sequence[str], ks: Sequence[int] = (1, 5, 10)
) -> dict:
    """How well each query finds its known duplicate among everything indexed.

    ``targets[i]`` is the text of query i's duplicate (it must be in the index); the query's own
    text is skipped if it is indexed too. Returns recall@k for each k and MRR@max(k).
    """
    depth = max(ks)
    hits = index.search(list(queries), depth + 1)
    ranks = []
    for query, target, found in zip(queries, targets, hits):
        texts = [h.text for h in found if h.text != query][:depth]
        ranks.append(texts.index(target) + 1 if target in texts else None)
    n = len(ranks)
    report = {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / n for k in ks}
    report[f"mrr@{depth}"] = sum(1 / r for r in ranks if r is not None) / n
    report["queries"] = n
    return report
