"""What :class:`~siamese.models.siamese.SiameseModel`'s ``encode``, ``similarity`` and ``predict`` accept, as
sentence-transformers users pass it: one text or a list of texts; vectors from ``encode`` (an array, a tensor, or a
list of 1-D vectors); one pair, a list of pairs or a table with two text columns. Anything else is one line
saying what is taken."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from ..data.pairs import Pairs, column_list, pair_columns, table_columns
from ..data.records import check_texts
from ..errors import DataError

# What similarity, similarity_pairwise and probability score: texts, or vectors from encode (the rows of an array or
# tensor, or a list of 1-D vectors, as encode(..., convert_to_numpy=False) returns).
TextsOrVectors = str | Sequence[str] | np.ndarray | torch.Tensor | Sequence[np.ndarray | torch.Tensor]


def any_tensor(*xs) -> bool:
    """A tensor among ``xs``, or a list of them: :meth:`SiameseModel.similarity` then answers with a tensor."""
    return any(isinstance(x, torch.Tensor) or (vector_list(x) and isinstance(x[0], torch.Tensor)) for x in xs)


# What similarity takes besides texts, as its error says.
VECTORS = "vectors from encode (an array or tensor with a row per text, or a list of 1-D arrays or tensors)"


def vector_list(x) -> bool:
    """A non-empty list or tuple of arrays or tensors (``encode(..., convert_to_numpy=False)`` gives one)."""
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(v, (np.ndarray, torch.Tensor)) for v in x)


def stack_vectors(vectors: Sequence[np.ndarray | torch.Tensor]) -> torch.Tensor:
    """One row per 1-D vector; vectors of other shapes, or of unequal lengths, are one line naming the first."""
    first = tuple(vectors[0].shape)
    for i, v in enumerate(vectors):
        if v.ndim != 1 or tuple(v.shape) != first:
            raise ValueError(
                f"vectors: item {i} has shape {tuple(v.shape)}, item 0 {first}: a list of vectors takes 1-D "
                "vectors of one length, as encode(..., convert_to_numpy=False) returns"
            )
    return torch.stack([torch.as_tensor(v).detach().float().cpu() for v in vectors])


def text_list(texts, method: str, also: str | None = None) -> list:
    """``texts`` as a list, or a TypeError saying what ``method`` takes (a number, None, bytes or a dict is no
    list of texts: ``list(5)`` would say only that an int is not iterable)."""
    takes = "a text or a list of texts" + (f", or {also}" if also else "")
    columns = None if isinstance(texts, dict) else table_columns(texts)
    if columns is not None:  # iterating a DataFrame gives its column names, not its texts
        one = f"df[{columns[0]!r}]" if len(columns) == 1 else "one of its columns, e.g. df['text']"
        raise TypeError(
            f"{method} takes {takes}; got a table ({type(texts).__name__}, columns: {column_list(columns)}): pass {one}"
        )
    if isinstance(texts, (bytes, dict, set, frozenset)) or not isinstance(texts, Iterable):
        what = "a set (its order is not defined)" if isinstance(texts, (set, frozenset)) else type(texts).__name__
        raise TypeError(f"{method} takes {takes}; got {what} {_short(texts)}")
    return list(texts)


def check_text_items(texts: list, takes: str) -> None:
    """:func:`~siamese.data.records.check_texts` (a missing value: drop or fill it), saying what is taken instead
    when the item is no missing value but something else (a number, a vector)."""
    try:
        check_texts(texts)
    except DataError:
        i, item = next((i, t) for i, t in enumerate(texts) if not isinstance(t, str))
        if _missing(item):
            raise
        raise DataError(f"texts: item {i} is {type(item).__name__} {_short(item)}, not a text; {takes}") from None


def _short(x) -> str:
    """``repr(x)`` on one line (a tensor's spans several), cut to 40 characters."""
    return " ".join(repr(x).split())[:40]


def _missing(x) -> bool:
    """None, NaN, or pandas' NA / NaT: a missing value, not a wrong type."""
    return x is None or (isinstance(x, float) and math.isnan(x)) or type(x).__name__ in ("NAType", "NaTType")


_PREDICT_TAKES = (
    "predict takes a pair (text1, text2), a list of (text1, text2) pairs, two lists of texts, or a table "
    "(DataFrame, Dataset, dict of columns) with two text columns such as text1/text2"
)


def one_pair(x) -> bool:
    """``(text1, text2)``: one pair (a list of two texts too, as sentence-transformers' ``CrossEncoder`` reads it)."""
    return isinstance(x, (tuple, list)) and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], str)


def pair_sides(pairs) -> tuple[list[str], list[str]]:
    """The two aligned lists of texts of what :meth:`SiameseModel.predict` takes for several pairs."""
    if isinstance(pairs, Pairs):
        return pairs.text1, pairs.text2
    columns = table_columns(pairs)
    if columns is not None:  # named as siamese.learn / evaluate find them (siamese.data.pairs.as_pairs)
        found = pair_columns(columns)
        if found is None:
            raise DataError(
                f"predict: a table needs two text columns named as a pair file's (text1, text2; sentence1, "
                f"sentence2; question1, question2; ...); its columns: {column_list(columns)}"
            )
        sides = [list(pairs[c]) for c in found[:2]]
        for name, texts in zip(found, sides):
            check_texts(texts, f"predict: column {name!r}")
        return sides[0], sides[1]
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise ValueError(f"{_PREDICT_TAKES}; got {type(pairs).__name__} {_short(pairs)}")
    rows = [tuple(p.texts) if hasattr(p, "texts") else p for p in pairs]  # sentence-transformers' InputExample
    for i, row in enumerate(rows):
        if not (isinstance(row, (tuple, list)) and len(row) == 2):
            raise ValueError(f"{_PREDICT_TAKES}; item {i} is {type(row).__name__} {_short(row)}")
    return [r[0] for r in rows], [r[1] for r in rows]


def verdicts(score_pairwise, pairs_or_a, b, threshold: float):
    """``score_pairwise(a, b) > threshold`` for what ``predict`` takes: one pair ``(text1, text2)`` or two texts
    ``text1, text2`` (one bool),
    two aligned lists, a list of pairs, a table or :class:`~siamese.data.pairs.Pairs` (a bool array)."""
    if isinstance(pairs_or_a, str) and isinstance(b, str):  # predict(text1, text2): one pair, as (text1, text2)
        pairs_or_a, b = (pairs_or_a, b), None
    if b is not None:
        return score_pairwise(pairs_or_a, b) > threshold
    if one_pair(pairs_or_a):
        return bool(score_pairwise([pairs_or_a[0]], [pairs_or_a[1]])[0] > threshold)
    a, b = pair_sides(pairs_or_a)
    return score_pairwise(a, b) > threshold
