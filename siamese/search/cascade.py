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

BAND_WIDTH = 0.01  # the sample's bins of first-stage similarity
BAND_SAMPLE = 48  # pairs the verifier scores per bin to choose the band


@dataclass
class Band:
    """Which candidate pairs the verifier decides: those whose first-stage similarity is in
    ``[lo, hi]``; above ``hi`` the first stage's verdict (duplicate) stands, under ``lo`` a pair is
    dropped. ``agreement``: on the sample, the estimated share of the verifier's own duplicates
    (among the candidates) on which the cascade agrees with it; ``sampled``: pairs scored for it."""

    lo: float
    hi: float | None
    agreement: float | None = None
    sampled: int = 0
    # the verifier's share of duplicates among the sampled pairs of the lowest bin: above 0, some
    # of its duplicates may lie under the search floor, out of the candidates (lower --floor)
    at_floor: float | None = None

    def unsure(self, similarity: np.ndarray) -> np.ndarray:
        inside = similarity >= self.lo
        return inside if self.hi is None else inside & (similarity <= self.hi)

    def as_json(self) -> dict:
        return {
            "lo": round(float(self.lo), 6),
            "hi": None if self.hi is None else round(float(self.hi), 6),
            "agreement": self.agreement,
            "sampled": self.sampled,
            "at_floor": self.at_floor,
        }


class PairScorer:
    """A verifier's score of pairs of ``texts`` by row: a bi-encoder encodes each distinct text once
    (kept for the next call), a cross-encoder reads each pair. ``threshold``: the verifier's own
    duplicate threshold on its scale."""

    def __init__(self, verifier, texts: Sequence[str], threshold: float, *, batch_size: int | None = None):
        self.verifier, self.texts, self.threshold, self.batch_size = verifier, texts, float(threshold), batch_size
        self.cross = getattr(verifier, "kind", None) == "cross"
        self.rows = np.empty(0, np.int64)  # texts encoded so far (sorted) and their vectors
        self.vectors = np.empty((0, 0 if self.cross else verifier.dim), np.float32)
        self.encoded = self.scored = 0
        self.seconds = 0.0

    def __call__(self, first: np.ndarray, second: np.ndarray, progress: bool = False) -> np.ndarray:
        import time

        t0 = time.perf_counter()
        first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
        if self.cross:
            kw = {} if self.batch_size is None else {"batch_size": self.batch_size}
            scores = (
                self.verifier.similarity_pairwise([self.texts[i] for i in first], [self.texts[j] for j in second], **kw)
                if len(first)
                else np.empty(0, np.float32)
            )
        else:
            self._encode(np.concatenate([first, second]), progress)
            a = self.vectors[np.searchsorted(self.rows, first)]
            b = self.vectors[np.searchsorted(self.rows, second)]
            scores = np.einsum("ij,ij->i", a, b)  # unit vectors: the cosine
        self.scored += len(first)
        self.seconds += time.perf_counter() - t0
        return np.asarray(scores, np.float32)

    def _encode(self, rows: np.ndarray, progress: bool) -> None:
        new = np.setdiff1d(np.unique(rows), self.rows)
        if not len(new):
            return
        vectors = self.verifier.encode([self.texts[i] for i in new], batch_size=self.batch_size, progress=progress)
        rows = np.concatenate([self.rows, new])
        order = np.argsort(rows, kind="stable")
        self.rows, self.vectors = rows[order], np.concatenate([self.vectors, vectors])[order]
        self.encoded += len(new)


def choose_band(
    similarity: np.ndarray,
    decide,
    *,
    floor: float,
    agreement: float = 0.99,
    per_bin: int = BAND_SAMPLE,
    width: float = BAND_WIDTH,
    seed: int = 0,
) -> tuple[Band, np.ndarray, np.ndarray]:
    """The narrowest band of first-stage similarity whose cascade agrees with the verifier, estimated
    on a sample of the candidate pairs (first-stage ``similarity``, all at ``floor`` or above).

    The candidates are cut into bins ``width`` wide; up to ``per_bin`` pairs of each are judged by
    ``decide(rows) -> verdicts`` (the verifier's own duplicate verdicts of those candidates). Each
    bin's share of duplicates times its size estimates how many of the verifier's duplicates (and
    non-duplicates) it holds.
    ``lo`` is the highest bin edge that leaves under it at most ``(1 - agreement) / 2`` of the
    estimated duplicates; ``hi`` the lowest edge above which at most as many non-duplicates lie
    (None: every candidate from ``lo`` up is verified). So the cascade's duplicates differ from the
    verifier's own, among the candidates, by about ``1 - agreement`` of them at most.
    Returns the band and the sampled rows with their verdicts (to reuse, not score again)."""
    similarity = np.asarray(similarity, np.float32)
    rng = np.random.default_rng(seed)
    bins = np.minimum(((similarity - floor) / width).astype(np.int64), int(np.ceil((1 - floor) / width)))
    bins = np.maximum(bins, 0)
    count = np.bincount(bins) if len(bins) else np.zeros(0, np.int64)
    picked = [
        rng.choice(np.flatnonzero(bins == b), size=min(per_bin, int(n)), replace=False)
        for b, n in enumerate(count)
        if n
    ]
    rows = np.sort(np.concatenate(picked)) if picked else np.empty(0, np.int64)
    verdicts = np.asarray(decide(rows), bool) if len(rows) else np.empty(0, bool)
    sampled = np.bincount(bins[rows], minlength=len(count))
    share = np.zeros(len(count))
    np.divide(np.bincount(bins[rows], weights=verdicts, minlength=len(count)), sampled, out=share, where=sampled > 0)
    positives, negatives = share * count, (1 - share) * count
    total = positives.sum()
    if total == 0:  # the verifier finds no duplicate among the sampled candidates: none to accept
        return Band(1.0, None, None, len(rows)), rows, verdicts
    allowed = (1 - agreement) / 2 * total
    below = np.concatenate([[0.0], np.cumsum(positives)])  # duplicates under each bin's lower edge
    lo_bin = int(np.flatnonzero(below <= allowed).max())
    above = np.concatenate([np.cumsum(negatives[::-1])[::-1], [0.0]])  # non-duplicates from each bin up
    hi_bin = int(np.flatnonzero(above <= allowed).min())
    lo = floor + lo_bin * width
    hi = None if hi_bin >= len(count) else max(floor + hi_bin * width, lo)
    missed = below[lo_bin] + (above[hi_bin] if hi is not None else 0.0)
    agreed = round(float(1 - missed / total), 4)
    band = Band(float(lo), None if hi is None else float(hi), agreed, len(rows), round(float(share[0]), 4))
    return band, rows, verdicts


@dataclass
class Cascaded:
    """What :func:`cascade` decided for each candidate pair: ``keep`` (a duplicate), the verifier's
    ``score`` (NaN where it was not asked), and the band and work done."""

    keep: np.ndarray
    score: np.ndarray
    band: Band
    info: dict


def cascade(
    verifier,
    texts: Sequence[str],
    first: np.ndarray,
    second: np.ndarray,
    similarity: np.ndarray,
    *,
    threshold: float,
    floor: float,
    band: float | str | None = "auto",
    agreement: float = 0.99,
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
    band a candidate is a duplicate, under it not."""
    import time

    started = time.perf_counter()
    similarity = np.asarray(similarity, np.float32)
    cross = getattr(verifier, "kind", None) == "cross"
    scorer = PairScorer(verifier, texts, verifier.threshold if cross else threshold, batch_size=batch_size)
    score = np.full(len(similarity), np.nan, np.float32)

    def decide(rows: np.ndarray) -> np.ndarray:
        score[rows] = scorer(first[rows], second[rows])
        return score[rows] > scorer.threshold

    if band == "auto":
        chosen, _, _ = choose_band(similarity, decide, floor=floor, agreement=agreement, seed=seed)
    elif band is None:
        chosen = Band(float(floor), None)
    elif isinstance(band, str):
        raise ValueError(f"band {band!r}: 'auto', None or a width")
    else:
        chosen = Band(float(threshold - band), float(threshold + band))
    unsure = chosen.unsure(similarity) & np.isnan(score)
    rows = np.flatnonzero(unsure)
    if len(rows):
        score[rows] = scorer(first[rows], second[rows], progress=progress)
    asked = chosen.unsure(similarity)
    keep = (asked & (score > scorer.threshold)) | (similarity > (np.inf if chosen.hi is None else chosen.hi))
    score[~asked] = np.nan  # sampled pairs outside the band were only read to choose it
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
        "texts_encoded": scorer.encoded,
        "pairs_scored": scorer.scored,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return Cascaded(keep, score, chosen, info)
