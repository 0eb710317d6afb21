"""Vectors already computed, taken again instead of encoding their texts twice: from a dedupe run
(its ``vectors.npy``) or an index (its FAISS index gives its vectors back).

``index build --reuse RUN`` after ``dedupe``, ``dedupe --reuse INDEX`` after ``index build``, and a
command writing over its own earlier output (the run or index it replaces) encode only the texts
that folder does not hold. What makes a reused vector the one encoding would give:

- the folder records the fingerprint of the model that computed its vectors (weights,
  vocabulary, architecture): another model's vectors are refused in one line;
- it records the precision they were computed in (bf16 and fp32 vectors differ in the third
  decimal): vectors of another precision are refused too;
- a text is matched by its exact characters (not the whitespace-collapsed form exact
  duplicates are grouped by: a tokenizer may see the difference);
- an earlier output is reused unasked only when this version of siamese wrote it (a newer one
  may encode differently); ``--reuse`` takes a folder of any version the user points at.

Nothing is cached behind the user's back: no store grows outside the folders they asked for, and
texts never land anywhere they did not write them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SearchIndexError, SiameseError
from ..version import __version__

if TYPE_CHECKING:  # types only: a dedupe with a static student never imports torch
    from ..models.siamese import SiameseModel


class KnownVectors:
    """Texts with the vectors one model computed for them, found in a run or an index folder."""

    def __init__(self, source: Path, row_of: dict[str, int], fetch: Callable[[np.ndarray], np.ndarray]):
        self.source = source
        self.row_of = row_of  # exact text -> its row in the folder
        self._fetch = fetch  # rows -> their vectors
        self.reused = 0  # vectors taken from here so far

    def __len__(self) -> int:
        return len(self.row_of)

    @classmethod
    def open(cls, path: str | os.PathLike, model: SiameseModel) -> KnownVectors:
        """The vectors of a dedupe run's or an index's folder, refused in one line when another
        model (or another precision) computed them."""
        path = Path(path)
        if (path / "run.json").is_file():
            return cls._from_run(path, model)
        if (path / "index.json").is_file():
            return cls._from_index(path, model)
        raise SearchIndexError(f"{path}: --reuse takes a dedupe run's folder or an index folder (found neither)")

    @classmethod
    def _from_run(cls, path: Path, model: SiameseModel) -> KnownVectors:
        from .run import DedupeRun

        run = DedupeRun.load(path)
        if run.vectors is None:
            raise SearchIndexError(f"{path}: a dedupe run against a reference keeps no vectors to reuse")
        _check_same(path / "run.json", run.meta, model)
        row_of: dict[str, int] = {}
        for d, row in enumerate(run.distinct.tolist()):
            row_of.setdefault(run.records[row].text, d)
        vectors = run.vectors
        return cls(path, row_of, lambda rows: np.asarray(vectors[rows], dtype=np.float32))

    @classmethod
    def _from_index(cls, path: Path, model: SiameseModel) -> KnownVectors:
        import faiss

        from ..io.manifest import read_manifest
        from .index import FORMAT, DuplicateIndex

        meta = read_manifest(path, "index.json", FORMAT, SearchIndexError, "index")
        if meta.get("kind") == "ondisk":
            raise SearchIndexError(f"{path}: an on-disk index does not give its vectors back; reuse a dedupe run")
        index = DuplicateIndex.load(path, model)  # refuses another model's index in one line
        _check_same(path / "index.json", meta, model)
        faiss_index = index.index
        if meta["kind"] == "ivf":
            faiss.extract_index_ivf(faiss_index).make_direct_map()
        row_of: dict[str, int] = {}
        for i, text in enumerate(index.texts):
            row_of.setdefault(text, i)
        return cls(path, row_of, lambda rows: faiss_index.reconstruct_batch(np.asarray(rows, dtype=np.int64)))

    def take(self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """The vectors of ``texts``: those held here (by exact text) taken, the others given by
        ``encode`` (called once, on the texts missing, in order; not at all when none is)."""
        texts = list(texts)
        rows = np.fromiter((self.row_of.get(t, -1) for t in texts), dtype=np.int64, count=len(texts))
        hit = rows >= 0
        missing = np.flatnonzero(~hit)
        if not len(missing):
            out = np.ascontiguousarray(self._fetch(rows), dtype=np.float32) if len(rows) else encode([])
        else:
            fresh = encode([texts[i] for i in missing.tolist()])
            out = np.empty((len(texts), fresh.shape[1]), dtype=np.float32)
            out[missing] = fresh
            if hit.any():
                out[hit] = self._fetch(rows[hit])
        self.reused += int(hit.sum())
        return out


def _check_same(file: Path, meta: dict, model: SiameseModel) -> None:
    theirs = meta.get("model_fingerprint")
    if theirs != model.fingerprint():
        raise SearchIndexError(
            f"{file.parent}: its vectors come from another model (fingerprint {str(theirs)[:12]}…, this model is "
            f"{model.fingerprint()[:12]}…): reuse a folder this model wrote, or drop --reuse"
        )
    precision, ours = meta.get("precision"), model.encoding_precision()
    if precision is not None and precision != ours:
        raise SearchIndexError(
            f"{file.parent}: its vectors were computed in {precision}, this run computes in {ours}: "
            f"set SIAMESE_PRECISION={precision} to reuse them, or drop --reuse"
        )


def open_reuse(path: str | os.PathLike | None, model: SiameseModel) -> KnownVectors | None:
    """:meth:`KnownVectors.open`, or None without a path."""
    return None if path is None else KnownVectors.open(path, model)


def earlier_output(path: str | os.PathLike, model: SiameseModel) -> KnownVectors | None:
    """The vectors of the run or index a command is about to replace at ``path``, when the same
    model (and precision) wrote them; None otherwise (not there, another model, damaged): the
    texts are then encoded as usual."""
    path = Path(path)
    if not path.is_dir():
        return None
    try:
        meta = next(json.loads((path / n).read_text()) for n in ("run.json", "index.json") if (path / n).is_file())
        if not isinstance(meta, dict) or meta.get("siamese_version") != __version__:
            return None
        return KnownVectors.open(path, model)
    except (SiameseError, OSError, ValueError, RuntimeError, StopIteration):
        return None
