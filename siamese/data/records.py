"""Records to de-duplicate: each text with its id and the other columns of its row, and exact copies.

Two texts are exact duplicates when they are equal after collapsing whitespace (runs of spaces,
tabs and newlines to one space, ends trimmed); only the first of each is encoded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .pairs import column_list, table_columns, text_column, text_rows


@dataclass
class Record:
    """One input text: ``row`` is its position among the texts read (from 0), ``id`` its id
    (the ``--id-column`` value, else its row number in the file), ``columns`` the rest of its row."""

    row: int
    id: str
    text: str
    columns: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict:
        out = {"id": self.id, "row": self.row, "text": self.text}
        if self.columns:
            out["columns"] = self.columns
        return out


def read_records(
    path: str | os.PathLike,
    column: str | None = None,
    id_column: str | None = None,
    *,
    skipped: list[int] | None = None,
) -> list[Record]:
    """Texts of a .txt file or a CSV/TSV column as records keeping the row's other columns.

    Ids come from ``id_column`` (a CSV column; each must be given and unique) or else are the row
    numbers in the file (from 1, header not counted). Empty texts are skipped; their row numbers are
    appended to ``skipped`` (see :func:`skipped_line`).
    """
    if id_column is not None and id_column == column:
        raise DataError(f"{path}: {id_column!r} is named as both the text column and the id column")
    return _records(text_rows(path, column, fields=True, skipped=skipped), id_column, path)


def _records(rows: Iterable[tuple[int, str, dict[str, str]]], id_column: str | None, where) -> list[Record]:
    """Records of ``(row number, text, other columns)`` rows, their ids ``id_column``'s values (each given and
    unique) or else the row numbers."""
    records, seen = [], {}
    for n, text, fields in rows:
        if id_column is not None:
            if id_column not in fields:
                found = "a .txt file has no columns" if not fields else f"found: {column_list(list(fields))}"
                raise DataError(f"{where}: no id column {id_column!r} ({found})")
            rid = fields.pop(id_column)
            if not rid.strip():
                raise DataError(f"{where}: row {n}: column {id_column!r} is empty (every text needs its id)")
            if rid in seen:
                raise DataError(f"{where}: row {n}: id {rid!r} repeats row {seen[rid]} (ids must be unique)")
            seen[rid] = n
        else:
            rid = str(n)
        records.append(Record(len(records), rid, text, fields))
    return records


def skipped_line(path: str | os.PathLike, rows: Sequence[int]) -> str | None:
    """What a command says of the empty texts it skipped: ``skipped 2 empty texts (q.csv rows 404, 405)``."""
    if not rows:
        return None
    shown = ", ".join(map(str, rows[:10])) + (f" and {len(rows) - 10} more" if len(rows) > 10 else "")
    return f"skipped {len(rows)} empty text{'s' * (len(rows) != 1)} ({path} row{'s' * (len(rows) != 1)} {shown})"


def table_records(table: Any, column: str | None = None, id_column: str | None = None) -> list[Record]:
    """A table's texts (a pandas DataFrame, Hugging Face Dataset or dict of columns) as records: the texts of
    ``column`` (default: the one named like texts, as a CSV's), ids from ``id_column`` (default: positions from
    0, as a list's), the other columns kept."""
    header = table_columns(table)
    assert header is not None, "table_records takes a table"
    name = column or text_column(Path("the table"), header)
    for wanted, what in ((name, "text"), (id_column, "id")):
        if wanted is not None and wanted not in header:
            raise DataError(f"the table has no {what} column {wanted!r} (columns: {column_list(header)})")
    if id_column is not None and id_column == name:
        raise DataError(f"the table: {id_column!r} is named as both the text column and the id column")
    texts = list(table[name])
    check_texts(texts, f"the table's column {name!r}")
    others = {c: list(table[c]) for c in header if c != name}
    rows = ((i, t, {c: str(v[i]) for c, v in others.items()}) for i, t in enumerate(texts))
    return _records(rows, id_column, "the table")  # ids: positions from 0, as a list's


def unused_id_column(records: list[Record]) -> str | None:
    """A column named like ``id`` that the records keep as an ordinary column (no id column was named): a
    command says it could be the ids, which are row numbers otherwise."""
    return (
        next((k for k in records[0].columns if k.strip().lower() in ("id", "qid", "uid", "key")), None)
        if records
        else None
    )


def as_records(texts: Sequence[str] | Sequence[Record]) -> list[Record]:
    """Records as they are, or plain texts as records with their position (from 0) as id."""
    if not all(isinstance(t, Record) for t in texts):
        check_texts(texts)
    return [t if isinstance(t, Record) else Record(i, str(i), t) for i, t in enumerate(texts)]


def check_texts(texts: Sequence[object], what: str = "texts") -> None:
    """Refuse, in one line naming the first, an item that is not a ``str``: a pandas column's missing value (NaN)
    or a None would otherwise fail deep inside a tokenizer."""
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise DataError(
                f"{what}: item {i} is {type(t).__name__} {t!r:.40}, not a text; drop or fill missing values first"
            )


def normalise(text: str) -> str:
    """The text exact-duplicate checks compare: whitespace runs collapsed to one space, ends trimmed."""
    return " ".join(text.split())


def exact_groups(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct, of)``: the rows of the first occurrence of each distinct (normalised) text, and for
    every row the position in ``distinct`` of the text it repeats (itself if first)."""
    first: dict[str, int] = {}
    of = np.fromiter((first.setdefault(normalise(t), len(first)) for t in texts), dtype=np.int64, count=len(texts))
    return np.unique(of, return_index=True)[1].astype(np.int64), of  # ids are given in order of first sight
