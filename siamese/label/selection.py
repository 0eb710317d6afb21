"""Which pair to ask about next: the one that teaches the threshold and the calibration the most.

Candidates are the corpus's nearest-neighbour pairs, found as ``siamese dedupe`` finds them (a
FAISS index of the model's vectors, :func:`siamese.search.duplicate_pairs`), or the pairs of a
given file. The choice, from the unanswered candidates:

* at first (``warmup`` answers) and then every ``explore_every``-th answer: a pair from the
  similarity band (one of ``bins`` equal-count bands of the candidates) that holds the fewest
  answers, so that the calibration is fitted over the whole range;
* otherwise a pair near the current threshold: the similarity aimed at is drawn within the band
  where the fitted duplicate probability is uncertain (about 0.25 to 0.75);
* either way a pair whose two texts were not in an answered pair comes first, so that a few
  clusters of near-copies do not take all the answers, and never (while another is open) a pair
  sharing a text with the pair answered last;
* after the page learned from the answers (:meth:`Selector.learned`), every other pair is the
  open one that the model before the learn and the learned one rank most differently (where
  one of them is wrong, and an answer says which); the others are chosen as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

STRATEGIES = ("active", "random")


@dataclass
class Candidates:
    """Pairs ``(texts[first[n]], texts[second[n]])`` with the model's similarity; ``ids[n]`` is the
    pair's (id1, id2) as written to the labels file."""

    texts: list[str]
    first: np.ndarray
    second: np.ndarray
    similarity: np.ndarray
    ids: list[tuple[str, str]]

    def __len__(self) -> int:
        return len(self.first)

    def pair(self, n: int) -> tuple[str, str]:
        return self.texts[self.first[n]], self.texts[self.second[n]]


def corpus_candidates(
    vectors: np.ndarray, texts: Sequence[str], ids: Sequence[str], *, k: int = 10, kind: str = "auto"
) -> Candidates:
    """Every pair of texts in which one is among the other's ``k`` nearest neighbours (the pairs
    ``dedupe`` considers), whatever their similarity."""
    from ..search import duplicate_pairs

    found = duplicate_pairs(vectors, -2.0, k=k, kind=kind)  # a cosine is never under -1: no floor
    return Candidates(
        list(texts),
        found.first,
        found.second,
        found.similarity.astype(np.float64),
        [(ids[i], ids[j]) for i, j in zip(found.first.tolist(), found.second.tolist())],
    )


def pair_candidates(text1: Sequence[str], text2: Sequence[str], similarity, ids: Sequence[str]) -> Candidates:
    """The given pairs as candidates; both ids of a pair are its own (its line in the file)."""
    n = len(text1)
    return Candidates(
        [*text1, *text2],
        np.arange(n),
        np.arange(n, 2 * n),
        np.asarray(similarity, dtype=np.float64),
        [(str(i), str(i)) for i in ids],
    )


class Selector:
    """Chooses the next candidate to ask about (see the module's doc)."""

    def __init__(
        self,
        candidates: Candidates,
        *,
        strategy: str = "active",
        seed: int = 0,
        bins: int = 10,
        warmup: int = 8,
        explore_every: int = 3,
        near: int = 16,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        self.c, self.strategy, self.warmup, self.explore_every, self.near = (
            candidates,
            strategy,
            warmup,
            explore_every,
            near,
        )
        self.rng = np.random.default_rng(seed)
        s = candidates.similarity
        edges = np.quantile(s, np.linspace(0, 1, bins + 1)[1:-1]) if len(s) else np.empty(0)
        self.band = np.searchsorted(edges, s, side="right")  # each candidate's similarity band
        self.bins = bins
        self.order = np.argsort(s, kind="stable")  # candidates by similarity, for the near pick
        self.sorted = s[self.order]
        self.disagreement: np.ndarray | None = None
        self.learned_at = 0
        # each pair's two texts by their words, not their place: in a pair file one question is
        # the first text of many rows
        _, ids = np.unique(np.asarray(candidates.texts, dtype=object), return_inverse=True)
        self.first, self.second = ids[candidates.first], ids[candidates.second]

    def learned(self, disagreement: np.ndarray | None, answered: int) -> None:
        """After a learn, with ``answered`` answers: how much the models before and after it
        disagree about each candidate (None: they do not, e.g. the model was kept as it was)."""
        self.disagreement, self.learned_at = disagreement, answered

    def choose(
        self, answered: Sequence[int], unavailable: np.ndarray, threshold: float | None, width: float | None
    ) -> int | None:
        """The next candidate, or None when none is left. ``answered``: the candidates answered (in
        order), ``unavailable``: a mask of those answered, skipped or shown elsewhere; ``threshold``
        and ``width`` (the half-width of the uncertain band): None until both labels were seen."""
        pool = ~unavailable
        if not pool.any():
            return None
        used = np.zeros(len(self.c.texts), bool)
        answered = np.asarray(answered, dtype=np.int64)
        used[self.first[answered]] = used[self.second[answered]] = True
        fresh = pool & ~used[self.first] & ~used[self.second]
        if self.strategy == "random":
            return int(self.rng.choice(np.flatnonzero(pool)))
        if len(answered):  # no text of the pair answered last, while another pair is open
            last = [self.first[answered[-1]], self.second[answered[-1]]]
            again = np.isin(self.first, last) | np.isin(self.second, last)
            if (pool & ~again).any():
                pool, fresh = pool & ~again, fresh & ~again
        m = len(answered)
        since = m - self.learned_at
        if self.disagreement is not None and since >= 0 and since % 2 == 0:
            return self._most_disagreed(pool, fresh)
        if threshold is None or width is None or m < self.warmup or m % self.explore_every == 0:
            return self._spread(answered, pool, fresh)
        return self._near(threshold + width * self.rng.uniform(-1, 1), pool, fresh)

    def _most_disagreed(self, pool: np.ndarray, fresh: np.ndarray) -> int:
        assert self.disagreement is not None
        options = np.flatnonzero(fresh if fresh.any() else pool)
        return int(options[np.argmax(self.disagreement[options])])

    def _spread(self, answered: np.ndarray, pool: np.ndarray, fresh: np.ndarray) -> int:
        counts = np.bincount(self.band[answered], minlength=self.bins).astype(float)
        open_bands = np.bincount(self.band[pool], minlength=self.bins) > 0
        counts[~open_bands] = np.inf
        ties = np.flatnonzero(counts == counts.min())
        band = self.rng.choice(ties)
        inside = pool & (self.band == band)
        options = np.flatnonzero(inside & fresh)
        return int(self.rng.choice(options if len(options) else np.flatnonzero(inside)))

    def _near(self, target: float, pool: np.ndarray, fresh: np.ndarray) -> int:
        """The open candidate nearest ``target``; a fresh one among the ``near`` nearest if any."""
        at = int(np.searchsorted(self.sorted, target))
        order, reach = self.order, self.near
        while True:
            window = order[max(0, at - reach) : at + reach]
            window = window[pool[window]]
            if len(window) >= min(self.near, int(pool.sum())) or reach >= len(order):
                break
            reach *= 4
        window = window[np.argsort(np.abs(self.c.similarity[window] - target), kind="stable")][: self.near]
        fresh_ones = window[fresh[window]]
        return int(fresh_ones[0] if len(fresh_ones) else window[0])


__all__ = ["STRATEGIES", "Candidates", "Selector", "corpus_candidates", "pair_candidates"]
