"""The cascade: a fast model proposes candidates, a stronger one decides.

- :func:`rerank`: a search's hits re-scored by a cross-encoder (siamese.cross), best first; each hit
  keeps its bi-encoder similarity (``first_stage``) and its verdict is the cross-encoder's.
- :func:`verify`: candidate pairs of a dedupe decided by a cross-encoder where the bi-encoder is
  unsure (within ``band`` of its threshold, or every candidate with ``band=None``).
- :func:`cascade`: candidate pairs of a dedupe (e.g. the static student's, over a whole corpus)
  decided by a stronger bi-encoder (MiniLM, mpnet, a fine-tuned model) or a cross-encoder, within
  a band of first-stage similarity chosen on a sample so that the cascade's verdicts agree with
  the verifier's own (:func:`choose_band`). A bi-encoder encodes only the texts of the pairs it
  decides, each once.

The band, its choice and the verdicts in and around it are siamese.decision.cascade's, which
``predict``, ``score`` and the service decide aligned pairs with too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..decision.cascade import (  # noqa: F401 (Band, choose_band, BAND_*: re-exported, dedupe's names for them)
    BAND_SAMPLE,
    BAND_WIDTH,
    Band,
    PairScorer,
    choose_band,
    decide_pairs,
    is_cross,
    resolve_band,
)

# A bi-encoder's cascade proposes each text's PROPOSE most similar texts (by the fast model), the
# verifier decides, and each text keeps its k best links by the verifier's scores, as the verifier's
# own dedupe keeps its k nearest: partners the fast model ranks 21st-50th are not lost. On the 25 %
# corpus of bench/dedupe_peers.py (k = 20), InsuranceQA's recall rose from 0.696 to 0.711 (MiniLM
# alone: 0.711) for no more texts encoded (bench/cascade_neighbours.py, docs/benchmarks.md).
PROPOSE = 50


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
    scores: np.ndarray | None = None  # the cross-encoder's score per candidate pair (NaN: not scored)


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
    scored = np.full(len(similarity), np.nan, np.float32)
    t0 = time.perf_counter()
    if len(rows):
        scores = cross.similarity_pairwise(
            [texts[i] for i in left[rows]], [texts[j] for j in right[rows]], batch_size=batch_size
        )
        keep[rows] = scores > cross.threshold
        scored[rows] = scores
    return Verified(keep, len(rows), int(keep[rows].sum()), time.perf_counter() - t0, scored)


# -- a bi-encoder (or any verifier) deciding a fast model's candidate pairs -------------------------
# The band and its choice are siamese.decision.cascade's, shared with predict, score and the service.


@dataclass
class Cascaded:
    """What :func:`cascade` decided for each candidate pair: ``keep`` (a duplicate), the verifier's
    ``score`` (NaN where it was not asked), ``beyond`` (a duplicate neither text kept among its
    ``links`` best: not a link), and the band and work done."""

    keep: np.ndarray
    score: np.ndarray
    band: Band
    info: dict
    beyond: np.ndarray


def cascade(
    verifier,
    texts: Sequence[str],
    first: np.ndarray,
    second: np.ndarray,
    similarity: np.ndarray,
    *,
    threshold: float,
    floor: float,
    band: float | str | Band | None = "auto",
    agreement: float = 0.99,
    links: int | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    seed: int = 0,
) -> Cascaded:
    """Fast proposes, strong decides: candidate pairs ``(first[i], second[i])`` of ``texts`` with
    first-stage ``similarity[i]`` (all at ``floor`` or above) decided by ``verifier``, a bi-encoder
    (its cosine above ``threshold``) or a cross-encoder (its score above its own threshold).

    ``band``: which candidates the verifier reads. ``"auto"``: chosen on a sample of the candidates
    so that the cascade agrees with the verifier (:func:`choose_band`, ``agreement``); a number
    ``b``: first-stage similarity within ``b`` of ``threshold``; None: every candidate. Above the
    band a candidate is a duplicate, under it not.

    ``links``: with more candidates per text than that (e.g. :data:`PROPOSE` proposed for ``k``
    links), ``"auto"`` chooses the band on the candidates among each text's ``links`` most similar
    ones, and each text keeps its ``links`` best duplicates by the verifier's score (the first
    stage's above the band): a pair stays if either text keeps it."""
    import time

    started = time.perf_counter()
    cross = is_cross(verifier)
    scorer = PairScorer(verifier, texts, verifier.threshold if cross else threshold, batch_size=batch_size)
    known = np.full(len(similarity), np.nan, np.float32)

    def scores_of(rows: np.ndarray, bar: bool = False) -> np.ndarray:
        todo = rows[np.isnan(known[rows])]
        if len(todo):
            known[todo] = scorer(first[todo], second[todo], progress=bar)
        return known[rows]

    if links is not None and band == "auto":
        near = np.flatnonzero(best_links(first, second, similarity, links))
        band = resolve_band(
            similarity[near],
            lambda rows: scores_of(near[rows]) > scorer.threshold,
            threshold=threshold,
            band=band,
            floor=floor,
            agreement=agreement,
            seed=seed,
        )
    done = decide_pairs(
        similarity,
        scores_of,
        threshold=threshold,
        verifier_threshold=scorer.threshold,
        band=band,
        floor=floor,
        agreement=agreement,
        seed=seed,
        known=known,
        progress=progress,
    )
    chosen, asked, keep, score = done.band, done.asked, done.duplicate, done.score
    beyond = np.zeros(len(keep), bool)
    if links is not None:
        decision = np.where(asked, score, np.maximum(similarity, threshold))  # as dedupe's pairs record them
        best = best_links(first, second, np.where(keep, decision, -np.inf), links)
        beyond = keep & ~best
        keep = keep & best
    info = {
        "model": str(getattr(verifier, "path", "") or ""),
        "verifier": "cross-encoder" if cross else "bi-encoder",
        "verifier_threshold": scorer.threshold,
        "band": chosen.as_json(),
        "candidates": len(similarity),
        "verified": int(asked.sum()),
        "accepted": int((asked & keep).sum()),
        "rejected": int((asked & ~keep).sum()),
        "above_band": int((keep & ~asked).sum()),
        "links_per_text": links,
        "beyond_links": int(beyond.sum()),  # duplicates dropped: neither text kept them among its best links
        "texts_encoded": scorer.encoded,
        "pairs_scored": scorer.scored,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return Cascaded(keep, score, chosen, info, beyond)


def best_links(first: np.ndarray, second: np.ndarray, score: np.ndarray, k: int) -> np.ndarray:
    """Per pair ``(first[i], second[i])``: is it among the ``k`` highest ``score`` of the pairs of
    either of its texts (ties by position)?"""
    ends = np.concatenate([first, second])
    pair = np.tile(np.arange(len(first)), 2)
    order = np.lexsort((-np.concatenate([score, score]), ends))
    rank = np.arange(len(ends)) - np.searchsorted(ends[order], ends[order])
    keep = np.zeros(len(first), bool)
    keep[pair[order][rank < k]] = True
    return keep
