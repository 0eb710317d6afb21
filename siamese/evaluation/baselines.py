"""Reference scorers to compare a model against: TF-IDF cosine similarity."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer


class TfidfBaseline:
    """Cosine similarity of TF-IDF vectors (word unigrams and bigrams, sublinear tf)."""

    def __init__(self, *, ngram_range: tuple[int, int] = (1, 2), min_df: int = 1, sublinear_tf: bool = True):
        self.vectorizer = TfidfVectorizer(ngram_range=ngram_range, min_df=min_df, sublinear_tf=sublinear_tf)

    def fit(self, texts: Iterable[str]) -> TfidfBaseline:
        self.vectorizer.fit(texts)
        return self

    def similarity_pairwise(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> np.ndarray:
        a = self.vectorizer.transform(texts_a)
        b = self.vectorizer.transform(texts_b)  # rows are L2-normalised, so the dot product is the cosine
        return np.asarray(a.multiply(b).sum(axis=1)).ravel()
