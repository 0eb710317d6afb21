"""Batch scoring of a pair file of any size: every input column kept, similarity, probability
(when the model is calibrated) and the duplicate verdict added, streamed in chunks."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.pairs import open_pairs, resolve_format
from ..errors import ConfigError, DataError
from ..io.atomic import as_umask_allows, atomic_file, check_not_input

if TYPE_CHECKING:
    from ..models.siamese import SiameseModel

ADDED = ("similarity", "probability", "duplicate")


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
) -> dict:
    """Score every pair of ``data`` (CSV/TSV, labels optional) into ``out``.

    Rows are read, scored and written ``chunk_size`` at a time, so the file never sits in memory.
    ``out`` is written to a temporary file renamed into place at the end: a bad row (reported as
    ``file:line: what``) or a crash leaves no output, and an existing ``out`` stays as it was.
    Its delimiter follows its extension (``.tsv``: tab, ``.csv``: comma), else the input's.
    ``progress(pairs_so_far, line)`` is called after each chunk. Returns a summary."""
    data, out = Path(data), Path(out)
    if chunk_size < 1:
        raise ConfigError(f"chunk size must be at least 1, got {chunk_size}")
    check_not_input(out, [data, model.path])
    t = model.threshold if threshold is None else threshold
    calibrated = model.calibrator is not None
    fmt = resolve_format(data, format, text1, text2, labelled=False)
    added = [c for c in ADDED if calibrated or c != "probability"]
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
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            writer = csv.writer(
                f, delimiter=delimiter, quoting=quoting, **({"quotechar": None} if quoting == csv.QUOTE_NONE else {})
            )
            writer.writerow(header + added)
            chunk = []

            def flush():
                scores = model.similarity_pairwise([r.text1 for r in chunk], [r.text2 for r in chunk])
                probabilities = model.calibrator(scores) if calibrated else None
                for i, (row, s) in enumerate(zip(chunk, scores)):
                    new = [f"{s:.6f}"] + ([f"{probabilities[i]:.6f}"] if calibrated else []) + [str(int(s > t))]
                    # Headerless formats (STS) may carry extra trailing fields: kept after the new columns.
                    writer.writerow(row.fields[:named] + new + row.fields[named:])

            for row in stream.rows:
                if fmt.columns is None and len(row.fields) != named:
                    raise DataError(
                        f"{data}:{row.line}: expected {named} fields (as the header has), found {len(row.fields)}"
                    )
                chunk.append(row)
                if len(chunk) == chunk_size:
                    flush()
                    pairs += len(chunk)
                    if progress:
                        progress(pairs, row.line)
                    chunk = []
            if chunk:
                flush()
                pairs += len(chunk)
                if progress:
                    progress(pairs, row.line)
        if not pairs:
            raise DataError(f"{data}: no pairs after the header")
        as_umask_allows(tmp)
    return {
        "data": str(data),
        "out": str(out),
        "pairs": pairs,
        "columns": header + added,
        "threshold": t,
        "calibrated": calibrated,
    }
