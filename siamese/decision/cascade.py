"""The cascade's decision: a fast model's similarity proposes, a stronger model (a verifier) decides
the pairs in a band of it. One implementation for every command that gives verdicts with a
verifier: ``dedupe --verify`` (its candidate pairs, siamese.search.cascade), ``predict``,
``score`` and the service (aligned pairs, :func:`verify_pairs`).

- :class:`Band`: the first-stage similarities the verifier reads; above it a pair is a duplicate,
  under it not.
- :func:`choose_band`: the narrowest band whose verdicts agree with the verifier's own, estimated
  on a sample of the pairs.
- :func:`resolve_band`: a width, ``"auto"`` or None (every pair) made a :class:`Band`.
- :func:`band_from_labels`: the band whose verdicts are the most accurate on labelled pairs (held
  out from both models' training): ``"auto"`` agrees with the verifier, which helps only where
  the verifier is the better judge.
- :func:`decide_pairs`: the verdicts of pairs given their first-stage similarity and a way to
  score any of them with the verifier (which reads only the pairs it decides, and the sample).
- :class:`PairScorer`: a verifier's scores of pairs of texts by row; a bi-encoder encodes each
  distinct text once.
- :func:`verify_pairs`: aligned texts ``a[i]``, ``b[i]`` decided by a first-stage model and a
  verifier.

Numpy only at import: the models are used through ``encode`` and ``similarity_pairwise``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .threshold import chance, platt

BAND_WIDTH = 0.01  # the sample's bins of first-stage similarity
BAND_SAMPLE = 48  # pairs the verifier scores per bin to choose the band
FIXED_BAND = (
    0.1  # the band's half-width where none is chosen on a sample (one pair, a request, a cross-encoder's dedupe)
)

BandSpec = float | str | None  # a half-width around the first stage's threshold, "auto", or None: every pair


@dataclass
class Band:
    """Which pairs the verifier decides: those whose first-stage similarity is in ``[lo, hi]``;
    above ``hi`` the pair is a duplicate, under ``lo`` it is not. ``agreement``: on the sample,
    the estimated share of the verifier's own duplicates (among the pairs) on which the cascade
    agrees with it; ``sampled``: pairs scored for it."""

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

    @property
    def half_width(self) -> float | None:
        """How far the band reaches either side of a threshold at its middle; None when it has no top."""
        return None if self.hi is None else (self.hi - self.lo) / 2

    def as_json(self) -> dict:
        return {
            "lo": round(float(self.lo), 6) if math.isfinite(self.lo) else None,  # None: from the lowest pair
            "hi": None if self.hi is None else round(float(self.hi), 6),
            "agreement": self.agreement,
            "sampled": self.sampled,
            "at_floor": self.at_floor,
        }


# Pairs a bi-encoder verifier scores at once: gathering both texts' vectors for every pair of a
# 1M-text dedupe at once (2.5M pairs x 384 floats x 2) held 7.7 GB.
_PAIR_CHUNK = 1 << 16


class PairScorer:
    """A verifier's score of pairs of ``texts`` by row: a bi-encoder encodes each distinct text once
    (kept for the next call), a cross-encoder reads each pair. ``threshold``: the verifier's own
    duplicate threshold on its scale."""

    def __init__(self, verifier, texts: Sequence[str], threshold: float, *, batch_size: int | None = None):
        self.verifier, self.texts, self.threshold, self.batch_size = verifier, texts, float(threshold), batch_size
        self.cross = is_cross(verifier)
        self.rows = np.empty(0, np.int64)  # texts encoded so far (sorted) and their vectors
        self.vectors = np.empty((0, 0 if self.cross else verifier.dim), np.float32)
        self.encoded = self.scored = 0
        self.seconds = 0.0

    def __call__(self, first: np.ndarray, second: np.ndarray, progress: bool = False) -> np.ndarray:
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
            scores = np.empty(len(first), np.float32)
            for at in range(0, len(first), _PAIR_CHUNK):  # both ends' vectors gathered a chunk at a time
                rows = slice(at, at + _PAIR_CHUNK)
                a = self.vectors[np.searchsorted(self.rows, first[rows])]
                b = self.vectors[np.searchsorted(self.rows, second[rows])]
                scores[rows] = np.einsum("ij,ij->i", a, b)  # unit vectors: the cosine
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
        at = np.empty(len(rows), np.int64)  # each row's place in sorted order: the merge is one new array
        at[order] = np.arange(len(rows))
        merged = np.empty((len(rows), vectors.shape[1]), np.float32)
        merged[at[: len(self.rows)]] = self.vectors
        merged[at[len(self.rows) :]] = vectors
        self.rows, self.vectors = rows[order], merged
        self.encoded += len(new)


def is_cross(model) -> bool:
    """A cross-encoder (siamese.cross): it scores pairs and decides with its own threshold."""
    return getattr(model, "kind", None) == "cross"


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
    ``decide(rows) -> verdicts`` (the verifier's own duplicate verdicts of those candidates). A
    logistic fit of the verdicts on the similarity, over all sampled pairs, gives each bin's share
    of duplicates; times the bin's size, it estimates how many of the verifier's duplicates (and
    non-duplicates) the bin holds.
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
    seen = np.zeros(len(count))  # each bin's share of duplicates in its sample
    np.divide(np.bincount(bins[rows], weights=verdicts, minlength=len(count)), sampled, out=seen, where=sampled > 0)
    # Each bin's share from one logistic fit over every sampled pair: the tails' shares (0.2-2 % of
    # ~10^4 pairs a bin) read 0 or >= 2 % from 48 pairs, which moved the lower edge from 0.51 to 0.70
    # between samples of one corpus (exact 0.63); the fit kept it within 0.61-0.64 (docs/benchmarks.md).
    fit = platt(similarity[rows], verdicts)  # None: one verdict only (or no sample)
    share = seen if fit is None else chance(fit, floor + (np.arange(len(count)) + 0.5) * width)  # at bin middles
    positives, negatives = share * count, (1 - share) * count
    total = positives.sum()
    if not verdicts.any():  # the verifier finds no duplicate among the sampled candidates: none to accept
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
    band = Band(float(lo), None if hi is None else float(hi), agreed, len(rows), round(float(seen[0]), 4))
    return band, rows, verdicts


def check_band(band: BandSpec | Band) -> None:
    """A band is a :class:`Band`, a finite half-width of 0 or more, ``"auto"`` or None (every pair)."""
    from ..errors import ConfigError

    if band is None or band == "auto" or isinstance(band, Band):
        return
    if isinstance(band, str) or isinstance(band, bool) or not isinstance(band, float | int):
        raise ConfigError(f"verify band {band!r}: a width of 0 or more, 'auto' or None (every pair)")
    if not math.isfinite(band) or band < 0:
        raise ConfigError(f"verify band {band!r}: a width must be a finite number of 0 or more")
    if band > 1:  # similarities and probabilities span at most [-1, 1]: past 1 it is every pair, unsaid
        raise ConfigError(f"verify band {band!r}: a width is at most 1; --verify-all verifies every pair")


def resolve_band(
    similarity: np.ndarray,
    decide,
    *,
    threshold: float,
    band: BandSpec | Band,
    floor: float | None = None,
    agreement: float = 0.99,
    seed: int = 0,
) -> Band:
    """The :class:`Band` that ``band`` asks for: as given; ``"auto"`` chosen by :func:`choose_band`
    on a sample of the pairs (from ``floor``, default the lowest similarity; ``decide(rows)``:
    the verifier's verdicts of those rows); a width ``w``: ``threshold ± w``; None: every pair
    from ``floor`` up (no floor: every pair)."""
    check_band(band)
    if isinstance(band, Band):
        return band
    if band == "auto":
        if floor is None:
            floor = float(np.min(similarity)) if len(similarity) else float(threshold)
        return choose_band(similarity, decide, floor=floor, agreement=agreement, seed=seed)[0]
    if band is None:
        return Band(-math.inf if floor is None else float(floor), None)
    return Band(float(threshold - band), float(threshold + band))  # type: ignore[operator]


def band_from_labels(
    similarity: np.ndarray,
    verifier_score: np.ndarray,
    labels: np.ndarray,
    *,
    threshold: float,
    verifier_threshold: float,
    step: float = BAND_WIDTH,
) -> Band:
    """The band ``threshold ± w`` whose cascade verdicts are the most accurate on labelled pairs
    (first-stage ``similarity`` and ``verifier_score`` of each, ``labels`` 0/1), over widths ``w``
    from 0 (the first stage alone) in steps of ``step`` up to the widest that holds every pair
    (the verifier alone); the narrowest of the most accurate. ``agreement`` is the chosen band's
    accuracy on the labels, ``sampled`` their number."""
    similarity = np.asarray(similarity, np.float64)
    verifier_says = np.asarray(verifier_score, np.float64) > verifier_threshold
    truth = np.asarray(labels).astype(bool)
    if not (len(similarity) == len(verifier_says) == len(truth)) or not len(truth):
        raise ValueError("band_from_labels needs one similarity, verifier score and label per pair, and some pairs")
    first_says = similarity > threshold
    distance = np.abs(similarity - threshold)
    widths = np.arange(0, math.ceil(float(distance.max()) / step) + 1) * step
    # a pair's verdict is the verifier's from the first width that holds it on: count right answers per width
    order = np.argsort(distance, kind="stable")
    change = (verifier_says[order] == truth[order]).astype(np.int64) - (first_says[order] == truth[order])
    held = np.searchsorted(distance[order], widths, side="right")  # pairs within each width
    right = int((first_says == truth).sum()) + np.concatenate([[0], np.cumsum(change)])[held]
    best = int(np.argmax(right))  # the first (narrowest) of the most accurate
    w = float(widths[best])
    return Band(float(threshold - w), float(threshold + w), round(float(right[best] / len(truth)), 4), len(truth))


def labelled_band(
    model, verifier, pairs, *, threshold: float | None = None, verifier_threshold: float | None = None
) -> Band:
    """:func:`band_from_labels` on labelled ``pairs`` (:class:`siamese.data.pairs.Pairs`), both models
    scoring every one of them: pairs neither model was trained on, or the band flatters whichever
    saw them."""
    from ..errors import DataError

    kinds = set(np.asarray(pairs.labels).tolist())
    if len(kinds) < 2:
        raise DataError(
            f"{pairs.source or 'the labelled pairs'}: {len(pairs)} pairs, all labelled "
            f"{kinds.pop() if kinds else '-'}; the band is chosen on pairs of both kinds"
        )
    done = verify_pairs(
        model, verifier, pairs.text1, pairs.text2, threshold=threshold, verifier_threshold=verifier_threshold, band=None
    )
    return band_from_labels(
        done.similarity,
        done.verifier_score,
        pairs.labels,
        threshold=done.threshold,
        verifier_threshold=done.verifier_threshold,
    )


@dataclass
class Decided:
    """What :func:`decide_pairs` decided: per pair whether the verifier was asked, its score (NaN
    where it was not) and the verdict; and the band."""

    band: Band
    asked: np.ndarray
    score: np.ndarray
    duplicate: np.ndarray


def decide_pairs(
    similarity: np.ndarray,
    score: Callable[[np.ndarray, bool], np.ndarray],
    *,
    threshold: float,
    verifier_threshold: float,
    band: BandSpec | Band,
    floor: float | None = None,
    agreement: float = 0.99,
    seed: int = 0,
    known: np.ndarray | None = None,
    progress: bool = False,
) -> Decided:
    """Pairs with first-stage ``similarity`` decided in a cascade: the verifier (``score(rows,
    progress)``: its scores of those pairs) decides those in the band (:func:`resolve_band`), with
    its score above ``verifier_threshold``; above the band a pair is a duplicate, under it not (with
    a width, the first stage's own verdict at ``threshold``). ``known``: verifier scores already
    at hand (NaN: not scored), not asked again. Pairs sampled to choose the band but outside it keep
    no score: the band's verdicts are those the sample estimated."""
    similarity = np.asarray(similarity, np.float32)
    scores = np.full(len(similarity), np.nan, np.float32) if known is None else np.array(known, np.float32)

    def verdicts(rows: np.ndarray) -> np.ndarray:
        todo = rows[np.isnan(scores[rows])]
        if len(todo):
            scores[todo] = score(todo, False)
        return scores[rows] > verifier_threshold

    chosen = resolve_band(
        similarity, verdicts, threshold=threshold, band=band, floor=floor, agreement=agreement, seed=seed
    )
    asked = chosen.unsure(similarity)
    todo = np.flatnonzero(asked & np.isnan(scores))
    if len(todo):
        scores[todo] = score(todo, progress)
    above = similarity > (np.inf if chosen.hi is None else chosen.hi)
    duplicate = np.where(asked, scores > verifier_threshold, above)
    scores[~asked] = np.nan
    return Decided(chosen, asked, scores, duplicate)


@dataclass
class PairVerdicts:
    """The cascade's verdicts of aligned pairs (:func:`verify_pairs`): per pair the first stage's
    ``similarity``, whether the verifier was asked (``verified``), its score (``verifier_score``,
    NaN where not asked) and the final verdict (``duplicate``); the band and thresholds used, and
    ``info`` (the verifier, counts, seconds) as JSON."""

    similarity: np.ndarray
    verified: np.ndarray
    verifier_score: np.ndarray
    duplicate: np.ndarray
    band: Band
    threshold: float  # the first stage's
    verifier_threshold: float
    info: dict

    @property
    def first_stage(self) -> np.ndarray:
        """The first stage's own verdicts, at its threshold."""
        return self.similarity > self.threshold


def verifier_name(verifier) -> str:
    """What the verifier is, for reports: its folder, else the pretrained name it was built from."""
    path = getattr(verifier, "path", None)
    if path:
        return str(path)
    built = (getattr(verifier, "info", None) or {}).get("pretrained") or {}
    return str(built.get("name") or built.get("folder") or type(verifier).__name__)


def verify_pairs(
    model,
    verifier,
    a: Sequence[str],
    b: Sequence[str],
    *,
    threshold: float | None = None,
    verifier_threshold: float | None = None,
    band: BandSpec | Band = FIXED_BAND,
    agreement: float = 0.99,
    similarity: np.ndarray | None = None,
    known: np.ndarray | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    progress: bool = False,
) -> PairVerdicts:
    """Is ``a[i]`` a duplicate of ``b[i]``? ``model`` (the first stage) scores every pair;
    ``verifier`` (a stronger bi-encoder, e.g. MiniLM or mpnet or a fine-tuned model, or a
    cross-encoder) decides the pairs in the band with its own threshold (``verifier_threshold``,
    default the verifier's); the others keep the verdict of their place: above the band a
    duplicate, under it not.

    ``band``: a number ``w``: the pairs within ``w`` of the first stage's ``threshold`` (default
    the model's), so outside the band the first stage's verdict stands; ``"auto"``: the narrowest
    band whose verdicts agree with the verifier's own on ``agreement`` of its duplicates,
    estimated on a sample of these pairs (:func:`choose_band`; the verifier scores the sample);
    None: the verifier decides every pair; a :class:`Band`: as given (one chosen before).
    ``similarity``: the first stage's similarities when already computed; ``known``: verifier
    scores already at hand (NaN: none). A bi-encoder verifier encodes each distinct text of the
    pairs it reads once."""
    started = time.perf_counter()
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"a has {len(a)} texts but b has {len(b)}")
    check_band(band)
    t = float(model.threshold if threshold is None else threshold)
    vt = float(verifier.threshold if verifier_threshold is None else verifier_threshold)
    if similarity is None:
        similarity = model.similarity_pairwise(a, b) if a else np.empty(0, np.float32)
    similarity = np.asarray(similarity, np.float32)
    if len(similarity) != len(a):
        raise ValueError(f"{len(similarity)} similarities for {len(a)} pairs")
    place: dict[str, int] = {}
    first = np.fromiter((place.setdefault(x, len(place)) for x in a), np.int64, len(a))
    second = np.fromiter((place.setdefault(x, len(place)) for x in b), np.int64, len(b))
    scorer = PairScorer(verifier, list(place), vt, batch_size=batch_size)
    done = decide_pairs(
        similarity,
        lambda rows, bar: scorer(first[rows], second[rows], progress=bar),
        threshold=t,
        verifier_threshold=vt,
        band=band,
        agreement=agreement,
        seed=seed,
        known=known,
        progress=progress,
    )
    first_stage = similarity > t
    info = {
        "model": verifier_name(verifier),
        "verifier": "cross-encoder" if scorer.cross else "bi-encoder",
        "verifier_threshold": vt,
        "band": done.band.as_json(),
        "pairs": len(a),
        "verified": int(done.asked.sum()),
        "accepted": int((done.asked & done.duplicate).sum()),
        "rejected": int((done.asked & ~done.duplicate).sum()),
        "changed": int((done.duplicate != first_stage).sum()),  # verdicts other than the first stage's
        "texts_encoded": scorer.encoded,
        "pairs_scored": scorer.scored,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return PairVerdicts(similarity, done.asked, done.score, done.duplicate, done.band, t, vt, info)
