"""The question side of the text→emoji model: airline tweets labelled positive, neutral or
negative, answered by 🎉 (1f389), 😈 (1f608) and 😡 (1f621)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.datasets import data_root
from ..data.input_files import check_utf8, open_table
from ..errors import DataError

# Class order is fixed: labels are indices into these tuples.
SENTIMENTS = ("positive", "neutral", "negative")
SENTIMENT_EMOJIS = ("1f389", "1f608", "1f621")  # 🎉 😈 😡


def default_tweets() -> Path:
    return data_root() / "airline_tweets" / "Tweets_12000.csv"


@dataclass
class Tweets:
    texts: list[str]
    labels: np.ndarray  # int64 indices into SENTIMENTS

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, rows) -> Tweets:
        rows = np.asarray(rows)
        return Tweets([self.texts[i] for i in rows], self.labels[rows])


def read_tweets(
    path: str | os.PathLike | None = None, *, text_column: str = "text", label_column: str = "airline_sentiment"
) -> Tweets:
    """Tweets and sentiment labels from a CSV (the Kaggle Twitter US Airline Sentiment columns)."""
    path = Path(path) if path is not None else default_tweets()
    texts, labels = [], []
    with open_table(path) as (header, rows):
        missing = [c for c in (text_column, label_column) if c not in header]
        if missing:
            raise DataError(f"{path}: missing column {missing[0]!r} (columns: {', '.join(header)})")
        x, y = header.index(text_column), header.index(label_column)
        for line, row in rows:
            label = row[y].strip().lower()
            if label not in SENTIMENTS:
                raise DataError(
                    f"{path}:{line}: column {label_column!r}: label {row[y]!r} is not one of {', '.join(SENTIMENTS)}"
                )
            text = row[x]
            if not text.strip():
                raise DataError(f"{path}:{line}: column {text_column!r}: empty text")
            check_utf8(text, path, line, text_column)
            texts.append(text)
            labels.append(SENTIMENTS.index(label))
    if not texts:
        raise DataError(f"{path}: no tweets in this file")
    return Tweets(texts, np.array(labels, dtype=np.int64))


def split_tweets(tweets: Tweets, fractions: list[float], *, seed: int = 0) -> list[Tweets]:
    """Stratified random parts of sizes ``fractions`` (of the whole), then the rest, in that order."""
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(len(fractions) + 1)]
    for label in range(len(SENTIMENTS)):
        rows = rng.permutation(np.flatnonzero(tweets.labels == label))
        cuts = np.cumsum([round(f * len(rows)) for f in fractions])
        for part, chunk in zip(parts, np.split(rows, cuts)):
            part.append(chunk)
    return [tweets.subset(np.sort(np.concatenate(p))) for p in parts]
