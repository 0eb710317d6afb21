"""Batch scoring of a pair file of any size: every input column kept, similarity, probability
(when the model is calibrated) and the duplicate verdict added, streamed in chunks. With a
verifier (``score --verify``), the verdicts are the cascade's (siamese.decision.cascade): the
verifier decides the pairs in a band of the model's similarity."""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..data.pairs import PairFormat, PairRow, open_pairs, resolve_format
from ..decision.cascade import (
    FIXED_BAND,
    Band,
    BandSpec,
    check_band,
    is_cross,
    resolve_band,
    verifier_name,
    verify_pairs,
)
from ..decision.threshold import check_threshold
from ..errors import ConfigError, DataError
from ..io.atomic import as_umask_allows, atomic_file, check_not_input

if TYPE_CHECKING:
    from ..models.siamese import SiameseModel

ADDED = ("similarity", "probability", "duplicate")
VERIFIED = ("verified", "verifier_score")  # added with a verifier: was it asked, and its score (blank if not)


def score_file(
    model: SiameseModel,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    format: str = "auto",
    text1: str | None = None,
    text2: str | None = None,
    chunk_size: int = 1024,
    threshold: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    verify=None,
    verify_band: BandSpec = "auto",
    verify_agreement: float = 0.99,
) -> dict:
    """Score every pair of ``data`` (CSV/TSV, labels optional) into ``out``.

    Rows are read, scored and written ``chunk_size`` at a time, so the file never sits in memory.
    ``out`` is written to a temporary file renamed into place at the end: a bad row (reported as
    ``file:line: what``) or a crash leaves no output, and an existing ``out`` stays as it was.
    Its delimiter follows its extension (``.tsv``: tab, ``.csv``: comma), else the input's.
    ``progress(pairs_so_far, line)`` is called after each chunk written. Returns a summary.

    ``verify``: a verifier (a loaded bi-encoder or cross-encoder, see
    :func:`siamese.models.loading.load_verifier`) that decides the pairs in ``verify_band`` of the
    model's similarity (:func:`siamese.decision.cascade.verify_pairs`: a width around the
    threshold, ``"auto"`` chosen on a sample of the file's pairs so that the verdicts agree with
    the verifier's own on ``verify_agreement`` of its duplicates (for a cross-encoder, which reads
    pairs one by one, ``"auto"`` is the fixed width), or None: every pair). The
    ``duplicate`` column is then the cascade's verdict, ``verified`` and ``verifier_score`` are
    added, and the summary's ``verify`` says how many pairs were verified, in how many seconds;
    where the file has a 0/1 label column, its ``metrics`` give the cascade's accuracy, precision,
    recall and F1 beside the model's alone. With ``"auto"`` the file is read three times (the
    model's similarity of every pair, kept in memory as one number each; the sample; the output)."""
    data, out = Path(data), Path(out)
    if chunk_size < 1:
        raise ConfigError(f"chunk size must be at least 1, got {chunk_size}")
    check_not_input(out, [data, model.path] + ([verify.path] if getattr(verify, "path", None) else []))
    check_band(verify_band)
    if verify is not None and verify_band == "auto" and is_cross(verify):
        verify_band = FIXED_BAND  # as dedupe: a cross-encoder reads pairs one by one, so no sample
    t = model.threshold if threshold is None else check_threshold(threshold)
    calibrated = model.calibrator is not None
    fmt = resolve_format(data, format, text1, text2, labelled=False)
    added = [c for c in ADDED if calibrated or c != "probability"] + (list(VERIFIED) if verify is not None else [])
    cascade = (
        None if verify is None else _Cascade(model, verify, data, fmt, chunk_size, t, verify_band, verify_agreement)
    )
    pairs, header = _write(model, data, out, fmt, added, chunk_size, t, cascade, progress)
    summary = {
        "data": str(data),
        "out": str(out),
        "pairs": pairs,
        "columns": header + added,
        "threshold": t,
        "calibrated": calibrated,
    }
    if cascade is not None:
        summary.update(cascade.summary())
    return summary


def _write(model, data: Path, out: Path, fmt: PairFormat, added: list[str], chunk_size, t, cascade, progress):
    """The output file, chunk by chunk; returns the pairs written and the input's header."""
    calibrated = model.calibrator is not None
    delimiter = {".tsv": "\t", ".csv": ","}.get(out.suffix.lower(), fmt.delimiter)
    # Same delimiter as the input: same quoting, so a TSV read without quotes is written without them.
    quoting = fmt.quoting if delimiter == fmt.delimiter else csv.QUOTE_MINIMAL
    pairs = 0
    with open_pairs(data, fmt, labelled=False) as stream, atomic_file(out) as tmp:
        header, named = stream.header, len(stream.header)
        clash = [c for c in added if c in header]
        if clash:
            raise DataError(
                f"{data}: already has column(s) {', '.join(repr(c) for c in clash)}; rename them "
                "so the scores do not hide them"
            )
        if cascade is not None:
            cascade.read_labels_from(header, fmt)
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            writer = csv.writer(
                f, delimiter=delimiter, quoting=quoting, **({"quotechar": None} if quoting == csv.QUOTE_NONE else {})
            )
            writer.writerow(header + added)
            for chunk in _chunks(stream.rows, data, fmt, named, chunk_size):
                a, b = [r.text1 for r in chunk], [r.text2 for r in chunk]
                if cascade is None:
                    scores = model.similarity_pairwise(a, b)
                    columns = [[str(int(s > t))] for s in scores]
                else:
                    scores, columns = cascade.decide(chunk, pairs)
                probabilities = model.calibrator(scores) if calibrated else None
                for i, (row, s) in enumerate(zip(chunk, scores)):
                    new = [f"{s:.6f}"] + ([f"{probabilities[i]:.6f}"] if calibrated else []) + columns[i]
                    # Headerless formats (STS) may carry extra trailing fields: kept after the new columns.
                    writer.writerow(row.fields[:named] + new + row.fields[named:])
                pairs += len(chunk)
                if progress:
                    progress(pairs, chunk[-1].line)
        if not pairs:
            raise DataError(f"{data}: no pairs after the header")
        as_umask_allows(tmp)
    return pairs, header


def _chunks(rows: Iterator[PairRow], data: Path, fmt: PairFormat, named: int, size: int) -> Iterator[list[PairRow]]:
    """The file's rows, ``size`` at a time, each checked to have the header's fields."""
    chunk: list[PairRow] = []
    for row in rows:
        if fmt.columns is None and len(row.fields) != named:
            raise DataError(f"{data}:{row.line}: expected {named} fields (as the header has), found {len(row.fields)}")
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Cascade:
    """The verdicts of a file's pairs with a verifier: the band (chosen on a sample of the file's
    pairs for ``"auto"``, before any output), each chunk decided by
    :func:`~siamese.decision.cascade.verify_pairs`, and the counts and labels for the summary."""

    def __init__(self, model, verifier, data: Path, fmt: PairFormat, chunk_size: int, t: float, band, agreement):
        self.model, self.verifier, self.t = model, verifier, float(t)
        self.vt = float(verifier.threshold)
        self.started = time.perf_counter()
        self.similarity: np.ndarray | None = None  # every pair's, when the band is chosen on a sample
        self.known: np.ndarray | None = None  # the sample's verifier scores (NaN elsewhere)
        self.texts_encoded = self.pairs_scored = 0
        if band == "auto":
            self.band = self._sampled(data, fmt, chunk_size, agreement)
        else:
            self.band = resolve_band(np.empty(0, np.float32), None, threshold=self.t, band=band)
        self.label_at: int | None = None
        self.labels: list[str] = []
        self.parts: list[tuple[np.ndarray, ...]] = []  # per chunk: similarity, verified, duplicate

    def _sampled(self, data: Path, fmt: PairFormat, chunk_size: int, agreement: float) -> Band:
        parts = []
        with open_pairs(data, fmt, labelled=False) as stream:
            for chunk in _chunks(stream.rows, data, fmt, len(stream.header), chunk_size):
                parts.append(self.model.similarity_pairwise([r.text1 for r in chunk], [r.text2 for r in chunk]))
        self.similarity = np.concatenate(parts).astype(np.float32) if parts else np.empty(0, np.float32)
        known = self.known = np.full(len(self.similarity), np.nan, np.float32)

        def verdicts(rows: np.ndarray) -> np.ndarray:
            a, b = _texts_at(data, fmt, rows)
            asked = verify_pairs(
                self.model, self.verifier, a, b, threshold=self.t, band=None, similarity=self.similarity[rows]
            )
            self._count(asked)
            known[rows] = asked.verifier_score
            return known[rows] > self.vt

        return resolve_band(self.similarity, verdicts, threshold=self.t, band="auto", agreement=agreement)

    def read_labels_from(self, header: list[str], fmt: PairFormat) -> None:
        """Where the file has its format's label column, its values are kept for the metrics."""
        self.label_at = header.index(fmt.label) if fmt.label and fmt.label in header else None

    def decide(self, chunk: list[PairRow], start: int) -> tuple[np.ndarray, list[list[str]]]:
        """A chunk's first-stage similarities and its added columns (verdict, verified, verifier score)."""
        end = start + len(chunk)
        done = verify_pairs(
            self.model,
            self.verifier,
            [r.text1 for r in chunk],
            [r.text2 for r in chunk],
            threshold=self.t,
            band=self.band,
            similarity=None if self.similarity is None else self.similarity[start:end],
            known=None if self.known is None else self.known[start:end],
        )
        self._count(done)
        self.parts.append((done.similarity, done.verified, done.duplicate))
        if self.label_at is not None:
            self.labels += [r.fields[self.label_at].strip() for r in chunk]
        columns = [
            [str(int(d)), str(int(v)), f"{s:.6f}" if v else ""]
            for d, v, s in zip(done.duplicate, done.verified, done.verifier_score)
        ]
        return done.similarity, columns

    def _count(self, done) -> None:
        self.texts_encoded += done.info["texts_encoded"]
        self.pairs_scored += done.info["pairs_scored"]

    def summary(self) -> dict:
        similarity, verified, duplicate = (np.concatenate(x) for x in zip(*self.parts))
        first = similarity > self.t
        result = {
            "verify": {
                "model": verifier_name(self.verifier),
                "verifier": "cross-encoder" if is_cross(self.verifier) else "bi-encoder",
                "verifier_threshold": self.vt,
                "band": self.band.as_json(),
                "verified": int(verified.sum()),
                "changed": int((duplicate != first).sum()),  # verdicts other than the model's alone
                "texts_encoded": self.texts_encoded,
                "pairs_scored": self.pairs_scored,  # the sample's included
                "seconds": round(time.perf_counter() - self.started, 3),
            },
            "duplicates": {"cascade": int(duplicate.sum()), "first_stage": int(first.sum())},
        }
        if self.labels and set(self.labels) <= {"0", "1"}:
            labels = np.asarray(self.labels) == "1"
            result["metrics"] = {
                "cascade": verdict_metrics(duplicate, labels),
                "first_stage": verdict_metrics(first, labels),
            }
        return result


def _texts_at(data: Path, fmt: PairFormat, rows: np.ndarray) -> tuple[list[str], list[str]]:
    """The two texts of the pairs at ``rows`` (sorted row numbers) of the file, read again."""
    wanted, a, b = set(rows.tolist()), [], []
    with open_pairs(data, fmt, labelled=False) as stream:
        for i, row in enumerate(stream.rows):
            if i in wanted:
                a.append(row.text1)
                b.append(row.text2)
    return a, b


def verdict_metrics(predicted: np.ndarray, labels: np.ndarray) -> dict:
    """Accuracy, precision, recall and F1 of 0/1 verdicts, and their confusion counts."""
    predicted, labels = np.asarray(predicted, bool), np.asarray(labels, bool)
    tp, fp = int((predicted & labels).sum()), int((predicted & ~labels).sum())
    fn, tn = int((~predicted & labels).sum()), int((~predicted & ~labels).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "accuracy": (tp + tn) / len(labels) if len(labels) else 0.0,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }
