"""The cascade: a fast bi-encoder proposes candidates, a cross-encoder (siamese.cross) decides.

- :func:`rerank`: a search's hits re-scored by the cross-encoder, best first; each hit keeps its
  bi-encoder similarity (``first_stage``) and its verdict is the cross-encoder's.
- :func:`verify`: candidate pairs of a dedupe decided by the cross-encoder where the bi-encoder is
  unsure (within ``band`` of its threshold, or every candidate with ``band=None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class RerankedHit:
    id: str
    text: str
    similarity: float  # the cross-encoder's score
    duplicate: bool  # the cross-encoder's verdict
    first_stage: float  # the bi-encoder's similarity that made it a candidate


def rerank(
    cross, queries: Sequence[str], hits: Sequence[Sequence], *, threshold: float | None = None
) -> list[list[RerankedHit]]:
    """Each query's hits (from :meth:`DuplicateIndex.search`) re-scored by ``cross`` in one batch."""
    t = cross.threshold if threshold is None else threshold
    a = [q for q, row in zip(queries, hits) for _ in row]
    b = [h.text for row in hits for h in row]
    scores = cross.similarity_pairwise(a, b) if a else np.zeros(0, dtype=np.float32)
    out, i = [], 0
    for row in hits:
        ranked = [
            RerankedHit(h.id, h.text, float(scores[i + j]), bool(scores[i + j] > t), float(h.similarity))
            for j, h in enumerate(row)
        ]
        i += len(row)
        out.append(sorted(ranked, key=lambda h: -h.similarity))
    return out


@dataclass
class Verified:
    """What :func:`verify` decided: ``keep[i]`` for each candidate pair, and the work done."""

    keep: np.ndarray  # bool, per candidate pair
    verified: int  # pairs the cross-encoder scored
    accepted: int  # of those, judged duplicates
    seconds: float


def verify(
    cross,
    texts: Sequence[str],
    left: np.ndarray,
    right: np.ndarray,
    similarity: np.ndarray,
    *,
    threshold: float,
    band: float | None = 0.1,
    batch_size: int = 64,
) -> Verified:
    """Candidate pairs ``(left[i], right[i])`` with bi-encoder ``similarity[i]`` (found at
    ``threshold - band`` or above): those within ``band`` of ``threshold`` go to ``cross``; above
    the band they stay duplicates, below it they are dropped. ``band=None``: ``cross`` decides all."""
    import time

    similarity = np.asarray(similarity, dtype=np.float32)
    if band is None:
        unsure = np.ones(len(similarity), dtype=bool)
    else:
        unsure = np.abs(similarity - threshold) <= band
    keep = similarity > threshold
    rows = np.flatnonzero(unsure)
    t0 = time.perf_counter()
    if len(rows):
        scores = cross.similarity_pairwise(
            [texts[i] for i in left[rows]], [texts[j] for j in right[rows]], batch_size=batch_size
        )
        keep[rows] = scores > cross.threshold
    return Verified(keep, len(rows), int(keep[rows].sum()), time.perf_counter() - t0)
