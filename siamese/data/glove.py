"""Pretrained word vectors (GloVe) for initialising an embedding layer.

Reads the standard ``glove.*.txt`` format (``word v1 … vd`` per line, optionally gzipped) and a
JSON object ``{word: [v1, …, vd]}`` such as ``shared/data/glove/glove-50d-5k.json``. Words the
vectors do not cover start from random vectors of the same scale; :class:`Coverage` says how many.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..io.manifest import read_json_object


def load_glove(path: str | os.PathLike, words: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """Word → float32 vector. With ``words``, keep only those (saves memory on large files)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: GloVe file not found")
    keep = None if words is None else set(words)
    vectors = _read_json(path) if path.suffix == ".json" else _read_text(path, keep)
    if keep is not None:
        vectors = {w: v for w, v in vectors.items() if w in keep}
    if vectors and len({len(v) for v in vectors.values()}) != 1:
        raise DataError(f"{path}: vectors have different lengths")
    return vectors


def _read_json(path: Path) -> dict[str, np.ndarray]:
    raw = read_json_object(path, DataError, "a JSON object mapping words to vectors")
    out = {}
    for word, vector in raw.items():
        try:
            out[word] = np.asarray(vector, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise DataError(f"{path}: word {word!r}: vector is not a list of numbers") from None
    return out


def _read_text(path: Path, keep: set[str] | None) -> dict[str, np.ndarray]:
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict[str, np.ndarray] = {}
    dim = None
    with opener(path, "rt", encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if dim is None:
                dim = len(parts) - 1
            if len(parts) < dim + 1 or dim < 1:
                raise DataError(f"{path}:{line_number}: expected a word and {dim} numbers, found {len(parts)} fields")
            # A few GloVe releases have words containing spaces: the vector is the last `dim` fields.
            word = " ".join(parts[:-dim])
            if keep is not None and word not in keep:
                continue
            try:
                out[word] = np.asarray(parts[-dim:], dtype=np.float32)
            except ValueError:
                raise DataError(f"{path}:{line_number}: word {word!r}: vector holds a non-number") from None
    return out


@dataclass
class Coverage:
    """How much of a vocabulary the vectors cover (padding and special tokens not counted)."""

    covered: int
    total: int
    missing: list[str] = field(default_factory=list)  # the most frequent uncovered words, up to 20

    @property
    def fraction(self) -> float:
        return self.covered / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"GloVe covers {self.covered} of {self.total} words ({100 * self.fraction:.1f}%)"


def embedding_matrix(
    vocabulary: Sequence[str],
    vectors: dict[str, np.ndarray],
    *,
    dim: int | None = None,
    pad_index: int | None = 0,
    seed: int = 0,
    lowercase_fallback: bool = True,
) -> tuple[np.ndarray, Coverage]:
    """A (len(vocabulary), dim) float32 matrix: the vector of each covered word, random normal
    vectors (matching the vectors' spread) for the rest, zeros for the padding row.

    ``vocabulary`` is in id order (``Vectorizer.vocabulary()``); words like ``[UNK]`` count as
    uncovered. ``lowercase_fallback`` also looks a word up in lower case.
    """
    if dim is None:
        if not vectors:
            raise DataError("no word vectors given and no dim to build an embedding matrix")
        dim = len(next(iter(vectors.values())))
    known = np.stack(list(vectors.values())) if vectors else np.zeros((1, dim), np.float32)
    if known.shape[1] != dim:
        raise DataError(f"word vectors have {known.shape[1]} dimensions, expected {dim}")
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, float(known.std()) or 0.1, size=(len(vocabulary), dim)).astype(np.float32)
    covered, missing = 0, []
    for i, word in enumerate(vocabulary):
        if i == pad_index:
            matrix[i] = 0.0
            continue
        vector = vectors.get(word)
        if vector is None and lowercase_fallback:
            vector = vectors.get(word.lower())
        if vector is not None:
            matrix[i] = vector
            covered += 1
        elif len(missing) < 20:
            missing.append(word)
    total = len(vocabulary) - (pad_index is not None and 0 <= pad_index < len(vocabulary))
    return matrix, Coverage(covered, total, missing)
