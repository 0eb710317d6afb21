"""Labelled text pairs: readers for the common formats, validation, and splits.

Every reader streams its file row by row (:mod:`siamese.data.input_files`: malformed quotes, rows of
the wrong width, repeated header names and a wrong delimiter are errors) and checks each value as
it goes, so a bad row is reported as ``file:line: column 'x': what is wrong`` before anything is built.
A CSV format's file is read tab-separated when it is a .tsv or its first line has tabs and no comma
(:func:`siamese.data.input_files.table_delimiter`), as the text readers read a CSV/TSV column.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from ..errors import DataError
from .input_files import check_delimiter, check_header, check_utf8, first_line, open_table, open_text, table_delimiter


@dataclass(frozen=True)
class PairFormat:
    """Where a file keeps its two texts and its label (or graded score)."""

    name: str
    text1: str
    text2: str
    label: str | None = "label"
    score: str | None = None
    delimiter: str = ","
    quoting: int = csv.QUOTE_MINIMAL
    columns: tuple[str, ...] | None = None  # set for files without a header line
    positive_score: float | None = None  # score >= this is a positive pair
    description: str = ""


FORMATS: dict[str, PairFormat] = {
    f.name: f
    for f in [
        PairFormat(
            "quora",
            "question1",
            "question2",
            "is_duplicate",
            description="Kaggle Quora Question Pairs: id,qid1,qid2,question1,question2,is_duplicate",
        ),
        PairFormat(
            "generic",
            "text1",
            "text2",
            "label",
            description="CSV text1,text2,label (rename columns with --text1/--text2/--label)",
        ),
        PairFormat(
            "msrp",
            "#1 String",
            "#2 String",
            "Quality",
            delimiter="\t",
            quoting=csv.QUOTE_NONE,
            description="Microsoft Research Paraphrase Corpus TSV",
        ),
        PairFormat(
            "paws",
            "sentence1",
            "sentence2",
            "label",
            delimiter="\t",
            quoting=csv.QUOTE_NONE,
            description="PAWS TSV id,sentence1,sentence2,label",
        ),
        PairFormat(
            "twitter-url",
            "sentence1",
            "sentence2",
            "label",
            description="Twitter URL Paraphrase Corpus CSV sentence1,sentence2,label",
        ),
        PairFormat(
            "sick",
            "sentence_A",
            "sentence_B",
            label=None,
            score="relatedness_score",
            delimiter="\t",
            quoting=csv.QUOTE_NONE,
            positive_score=4.0,
            description="SICK TSV; relatedness 1-5, positive when >= 4",
        ),
        PairFormat(
            "sts",
            "sentence1",
            "sentence2",
            label=None,
            score="score",
            delimiter="\t",
            quoting=csv.QUOTE_NONE,
            positive_score=4.0,
            columns=("genre", "file", "years", "id", "score", "sentence1", "sentence2"),
            description="STS Benchmark TSV without header; score 0-5, positive when >= 4",
        ),
        PairFormat(
            "semeval",
            "orgq_text",
            "relq_text",
            "label",
            description="SemEval-2016 Task 3 subtask B question-question CSV",
        ),
        PairFormat(
            "mqp",
            "question_1",
            "question_2",
            "label",
            description="Medical Question Pairs CSV dr_id,question_1,question_2,label",
        ),
        PairFormat(
            "parasci",
            "sentence1",
            "sentence2",
            label=None,
            description="ParaSCI CSV sentence1,sentence2: every row is a paraphrase (label 1)",
        ),
    ]
}


@dataclass
class Pairs:
    """Two aligned lists of texts with a 0/1 label per pair and, where the source has one, a graded score."""

    text1: list[str]
    text2: list[str]
    labels: np.ndarray  # int8, 1 = duplicate / paraphrase
    scores: np.ndarray | None = None  # float32 graded similarity (STS-B, SICK)
    source: str = ""
    line_numbers: np.ndarray | None = field(default=None, repr=False)
    weights: np.ndarray | None = field(default=None, repr=False)  # per-pair sampling weight in training (None: 1)
    triplets = False  # the training-data contract, shared with siamese.data.answers.Triplets

    def __len__(self) -> int:
        return len(self.text1)

    def sides(self) -> list[list[str]]:
        """The aligned texts a model encodes: (text1, text2)."""
        return [self.text1, self.text2]

    def with_weight(self, weight: float) -> Pairs:
        """The same pairs, each drawn ``weight`` times per epoch on average when training."""
        if weight < 0:
            raise ValueError(f"{self.source}: a data set weight must be >= 0, got {weight}")
        return replace(self, weights=np.full(len(self), weight, dtype=np.float32))

    def subset(self, index: Sequence[int] | np.ndarray) -> Pairs:
        """The pairs at ``index``, in that order."""
        index = np.asarray(index, dtype=np.int64)
        return Pairs(
            text1=[self.text1[i] for i in index],
            text2=[self.text2[i] for i in index],
            labels=self.labels[index],
            scores=None if self.scores is None else self.scores[index],
            source=self.source,
            line_numbers=None if self.line_numbers is None else self.line_numbers[index],
            weights=None if self.weights is None else self.weights[index],
        )

    def positives(self) -> Pairs:
        """The duplicate pairs (label 1)."""
        return self.subset(np.flatnonzero(self.labels == 1))

    @staticmethod
    def concat(parts: Sequence[Pairs]) -> Pairs:
        """Several pair sets as one (graded scores and weights kept; a 0/1 part mixed with graded ones takes
        the top or the bottom of their scale)."""
        if len(parts) == 1:
            return parts[0]
        scores = weights = None
        graded = [p.scores for p in parts if p.scores is not None]
        if graded:  # a 0/1 set mixed with graded ones: label 1 is the top of their scale, 0 the bottom
            low, high = min(float(s.min()) for s in graded), max(float(s.max()) for s in graded)
            scores = np.concatenate(
                [
                    p.scores if p.scores is not None else np.where(p.labels == 1, high, low).astype(np.float32)
                    for p in parts
                ]
            )
        if any(p.weights is not None for p in parts):
            weights = np.concatenate([np.ones(len(p), np.float32) if p.weights is None else p.weights for p in parts])
        return Pairs(
            text1=[t for p in parts for t in p.text1],
            text2=[t for p in parts for t in p.text2],
            labels=np.concatenate([p.labels for p in parts]),
            scores=scores,
            source="+".join(p.source for p in parts),
            weights=weights,
        )


def detect_format(path: str | os.PathLike, *, labelled: bool = True) -> PairFormat:
    """Pick the format whose header columns are all present in the file's first line (with
    ``labelled=False``, only its two text columns need be)."""
    path = Path(path)
    first = first_line(path)
    table = table_delimiter(path, first)
    for fmt in FORMATS.values():
        if fmt.columns is not None:
            continue
        # a CSV format's file is read tab-separated when it is one (see resolve_format)
        delimiter = table if fmt.delimiter == "," else fmt.delimiter
        header = first.split(delimiter)
        needed = {fmt.text1, fmt.text2} | ({fmt.label or fmt.score or fmt.text1} if labelled else set())
        if needed <= set(h.strip() for h in header):
            return fmt
    fields = first.split("\t")
    if len(fields) >= 7 and _is_float(fields[4]):
        return FORMATS["sts"]
    named = _named_columns(path, first, labelled=labelled)
    if named is not None:
        return named
    check_delimiter(path, first, table)  # a semicolon-separated file is told so
    check_header(path, first.split(table))  # text1,text2,text1: named so, not as a format unknown
    raise DataError(
        f"{path}: cannot tell the format from the first line {first[:80]!r}; "
        f"pass --format ({', '.join(FORMATS)}) or name the columns with --text1/--text2"
        + ("/--label" if labelled else "")
        + " (format=, text1=, ... in Python)"
    )


# Column names other tools give a pair's texts (Hugging Face data sets, GLUE, sentence-transformers' examples):
# "text_a"/"text_b", "sentence 1"/"sentence 2", "Question1"/"Question2", ..., matched ignoring case and separators.
_TEXT_COLUMN = re.compile(r"(text|sentence|question|query|string)[ _-]?([12ab])", re.IGNORECASE)
_LABEL_COLUMNS = ("label", "labels", "is_duplicate", "duplicate", "is_paraphrase", "paraphrase", "target", "quality")


def pair_columns(header: Sequence[str]) -> tuple[str, str, str | None] | None:
    """The two text columns and the label column (None if there is none) of a header that names them as other
    tools do (text1/text2, text_a/text_b, sentence_1/sentence_2, question1/question2, ...; label, is_duplicate,
    ...); None when no one pair of text columns is named so."""
    texts: dict[str, dict[str, str]] = {}  # stem -> {"1": column, "2": column}
    for h in header:
        m = _TEXT_COLUMN.fullmatch(h)
        if m:
            texts.setdefault(m[1].lower(), {})["1" if m[2].lower() in "1a" else "2"] = h
    both = [sides for sides in texts.values() if len(sides) == 2]
    if len(both) != 1:
        return None
    label = next((h for h in header if h.lower() in _LABEL_COLUMNS), None)
    return both[0]["1"], both[0]["2"], label


def _named_columns(path: Path, first: str, *, labelled: bool) -> PairFormat | None:
    """A generic format for a header :func:`pair_columns` reads (with a label column when ``labelled``)."""
    delimiter = table_delimiter(path, first)
    columns = pair_columns([h.strip().strip('"') for h in first.split(delimiter)])
    if columns is None or (labelled and columns[2] is None):
        return None
    text1, text2, label = columns
    return replace(
        FORMATS["generic"],
        text1=text1,
        text2=text2,
        label=label or "label",
        delimiter=delimiter,
        description=f"CSV with columns {text1!r}, {text2!r}" + (f", {label!r}" if label else ""),
    )


# A label as a file writes it: 0/1, as pandas writes a float or bool column (1.0, True), which the Python API
# takes as they are, or as a person or a spreadsheet does (yes/no, y/n); any case. Not free words ("duplicate",
# "same"): which of the two they mean is a guess.
LABEL_VALUES = {
    "0": 0,
    "1": 1,
    "0.0": 0,
    "1.0": 1,
    "false": 0,
    "true": 1,
    "no": 0,
    "yes": 1,
    "n": 0,
    "y": 1,
}
LABEL_RULE = "label must be 0/1, true/false or yes/no"  # what a refusal says is accepted


def parse_label(raw: str, path: str | os.PathLike, line: int | str, column: str) -> int:
    """A pair file's label as 0 or 1 (:data:`LABEL_VALUES`), or a one-line DataError naming the file, line and
    column."""
    value = raw.strip()
    label = LABEL_VALUES.get(value.lower())
    if label is None:
        raise DataError(f"{path}:{line}: column '{column}': {LABEL_RULE}, got {value!r}")
    return label


@dataclass
class PairRow:
    """One row of a pair file: its line, every field as read, the two (checked) texts, and the
    label and score when they are read."""

    line: int
    fields: list[str]
    text1: str
    text2: str
    label: int | None
    score: float | None


@dataclass
class PairStream:
    """An open pair file: its format, its header (the format's columns for files without one),
    and its rows, read one at a time."""

    path: Path
    format: PairFormat
    header: list[str]
    rows: Iterator[PairRow]


@contextlib.contextmanager
def open_pairs(path: str | os.PathLike, fmt: PairFormat, *, labelled: bool = True) -> Iterator[PairStream]:
    """Open a pair file and stream its rows, checking every value as it goes. With
    ``labelled=False`` the label and score columns are neither required nor read (the file may
    have none): each row still carries all its fields."""
    path = Path(path)
    table = open_table(
        path, delimiter=fmt.delimiter, quoting=fmt.quoting, columns=fmt.columns, remedy=_delimiter_remedy(path, fmt)
    )
    with table as (header, rows):
        wanted = [c for c in (fmt.text1, fmt.text2) + ((fmt.label, fmt.score) if labelled else ()) if c]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise DataError(
                f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} for format "
                f"'{fmt.name}' (found: {', '.join(repr(h) for h in header[:12])})"
            )
        yield PairStream(path, fmt, header, _rows(rows, path, fmt, {c: header.index(c) for c in wanted}, labelled))


def _delimiter_remedy(path: Path, fmt: PairFormat) -> str | None:
    """What reads a pair file whose first line ``fmt``'s delimiter does not split (None: the reader's own
    advice, for a .tsv holding commas: rename it .csv)."""
    own = FORMATS.get(fmt.name)
    tsv = path.suffix.lower() == ".tsv"
    if own is not None and own.delimiter == "\t" and fmt.delimiter == "\t":  # MSRP, PAWS, SICK, STS-B
        return (
            f"format {fmt.name!r} reads its corpus's tab-separated files; for this one pass --format generic with "
            "--text1/--text2/--label naming its columns" + (" and rename it .csv" if tsv else "")
        )
    if fmt.delimiter == "\t" and tsv:
        return None
    return f"as given, format {fmt.name!r} reads with delimiter {fmt.delimiter!r}"  # delimiter= in Python


def _rows(rows, path: Path, fmt: PairFormat, col: dict[str, int], labelled: bool) -> Iterator[PairRow]:
    for line, row in rows:
        texts = []
        for name in (fmt.text1, fmt.text2):
            text = row[col[name]]
            check_utf8(text, path, line, name)
            if not text.strip():
                raise DataError(f"{path}:{line}: column '{name}' is empty")
            texts.append(text)
        label = score = None
        if labelled:
            if fmt.score:
                raw = row[col[fmt.score]].strip()
                if not _is_float(raw):
                    raise DataError(f"{path}:{line}: column '{fmt.score}': expected a number, got {raw!r}")
                score = float(raw)
            if fmt.label:
                label = parse_label(row[col[fmt.label]], path, line, fmt.label)
            elif fmt.score:
                label = int(score >= fmt.positive_score)
            else:
                label = 1  # positives-only corpus
        yield PairRow(line, row, texts[0], texts[1], label, score)


def iter_pairs(path: str | os.PathLike, fmt: PairFormat) -> Iterator[tuple[int, str, str, int, float | None]]:
    """Yield ``(line, text1, text2, label, score)`` for each row, checking every value."""
    with open_pairs(path, fmt) as stream:
        for r in stream.rows:
            yield r.line, r.text1, r.text2, r.label, r.score


def read_pairs(
    path: str | os.PathLike,
    format: str | PairFormat = "auto",
    *,
    text1: str | None = None,
    text2: str | None = None,
    label: str | None = None,
    delimiter: str | None = None,
) -> Pairs:
    """Read a file of labelled pairs.

    ``format`` is a name from :data:`FORMATS`, a :class:`PairFormat`, or ``"auto"`` (detected from
    the header). Naming any of
    ``text1``/``text2``/``label`` overrides that column of the chosen format (``generic`` if auto
    detection fails), for files with their own column names.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"read_pairs reads a pair file, not a {type(path).__name__}; learn, train and evaluate take a table or "
            "(text1, text2, label) rows as they are"
        )
    path = Path(path)
    fmt = resolve_format(path, format, text1, text2, label, delimiter)
    lines, t1, t2, labels, scores = [], [], [], [], []
    for line, a, b, y, s in iter_pairs(path, fmt):
        lines.append(line)
        t1.append(a)
        t2.append(b)
        labels.append(y)
        scores.append(s)
    if not t1:
        raise DataError(f"{path}: no pairs after the header")
    return Pairs(
        text1=t1,
        text2=t2,
        labels=np.asarray(labels, dtype=np.int8),
        scores=np.asarray(scores, dtype=np.float32) if fmt.score else None,
        source=str(path),
        line_numbers=np.asarray(lines, dtype=np.int64),
    )


# Header names that say "the texts are here", in no order: a file with exactly one of them (or,
# failing that, exactly one name holding one of these words) needs no --column.
TEXT_NAMES = (
    "text",
    "question",
    "sentence",
    "body",
    "title",
    "content",
    "query",
    "message",
    "comment",
    "description",
    "review",
    "tweet",
    "utterance",
    "document",
    "passage",
    "answer",
    "prompt",
    "abstract",
    "summary",
)
# Names of id columns (a word of the name), never guessed as the texts even when named like them.
ID_WORDS = ("id", "ids", "qid", "uid", "uuid", "key", "index", "idx", "no", "num", "number", "code")
_GUESS_ROWS = 200  # rows a guessed column is looked at before its texts are used: whole numbers are ids


# what the Python API's functions take as labelled pairs (as_pairs)
PairsLike: TypeAlias = Pairs | str | os.PathLike | Sequence[tuple[str, str, int]] | Any


def as_pairs(value: PairsLike, what: str = "pairs") -> Pairs:
    """What the Python API takes as labelled pairs, as :class:`Pairs`: ``Pairs`` (or answer triplets) as they are,
    a pair file's path (:func:`read_pairs`, its format detected), ``(text1, text2, label)`` rows or
    sentence-transformers ``InputExample``s with a 0/1 label, or a table of columns (a pandas DataFrame, a Hugging
    Face ``Dataset``, a dict of lists) whose columns are named as a pair file's may be (text1/text2/label,
    sentence1/sentence2/label, question1/question2/is_duplicate, ...). Anything else is a TypeError naming what
    is accepted; a bad row, a DataError naming its index."""
    if isinstance(value, Pairs) or getattr(value, "triplets", False):
        return value
    if isinstance(value, (str, os.PathLike)):
        return read_pairs(value)
    columns = table_columns(value)
    if columns is not None:
        return _pairs_from_columns(value, columns, what)
    if isinstance(value, (bytes, dict)) or not isinstance(value, (Sequence, Iterator)):
        raise TypeError(
            f"{what}: expected siamese.Pairs (siamese.read_pairs), a pair file's path, (text1, text2, label) rows "
            f"or a table with text1/text2/label columns; got {type(value).__name__}"
        )
    t1, t2, labels = [], [], []
    for i, row in enumerate(value):
        if hasattr(row, "texts") and hasattr(row, "label"):  # sentence-transformers' InputExample
            row = (*row.texts, row.label)
        ok = isinstance(row, (tuple, list)) and len(row) == 3 and isinstance(row[0], str) and isinstance(row[1], str)
        label = _label01(row[2]) if ok else None
        if label is None:
            raise DataError(
                f"{what}: row {i}: expected (text1, text2, label) with label 0/1, true/false or yes/no, got {row!r:.80}"
            )
        t1.append(row[0])
        t2.append(row[1])
        labels.append(label)
    return Pairs(t1, t2, np.array(labels, dtype=np.int8), source=what)


def _label01(y: Any) -> int | None:
    """0 or 1 as any number type says it (1, 1.0, True, numpy's) or as a pair file's label reads (``"yes"``,
    ``"1"``, ``"true"``: :data:`LABEL_VALUES`), else None (pandas' missing value, NA, is neither)."""
    if isinstance(y, str):
        return LABEL_VALUES.get(y.strip().lower())
    try:
        return int(y) if y in (0, 1) else None
    except TypeError:  # pd.NA refuses to be a bool
        return None


def table_columns(value: Any) -> list[str] | None:
    """The column names of a table (pandas DataFrame, Hugging Face Dataset, dict of columns), else None."""
    if isinstance(value, dict):
        return [str(k) for k in value]
    names = getattr(value, "column_names", None)  # Hugging Face datasets
    if names is None and hasattr(value, "columns") and hasattr(value, "iloc"):  # pandas
        names = value.columns
    return None if names is None else [str(n) for n in names]


def _pairs_from_columns(table: Any, columns: list[str], what: str) -> Pairs:
    found = pair_columns(columns)
    if found is None or found[2] is None:
        raise DataError(
            f"{what}: a table needs two text columns and a label column named as a pair file's (text1, text2, "
            f"label; sentence1, sentence2, label; ...); its columns: {column_list(columns)}"
        )
    text1, text2, label = found
    t1, t2, raw = (list(table[c]) for c in (text1, text2, label))
    labels = [_label01(y) for y in raw]
    for i, (a, b, y) in enumerate(zip(t1, t2, labels)):
        if not (isinstance(a, str) and isinstance(b, str)) or y is None:
            raise DataError(
                f"{what}: row {i}: expected texts in {text1!r}, {text2!r} and 0/1, true/false or yes/no in "
                f"{label!r}, got {(a, b, raw[i])!r:.80}"
            )
    return Pairs(t1, t2, np.array(labels, dtype=np.int8), source=what)


def _words(name: str) -> list[str]:
    """A header name's words, lower-cased: "Question_Text" and "questionText" -> ["question",
    "text"], "qid1" -> ["qid"]."""
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)]


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and word[:-1] in TEXT_NAMES else word


def _is_id_name(name: str) -> bool:
    return any(w in ID_WORDS for w in _words(name))


def column_list(header: Sequence[str], limit: int = 30) -> str:
    """A header's names for a message: the first ``limit``, and how many more ("... and 3 more")."""
    more = f", ... and {len(header) - limit} more" if len(header) > limit else ""
    return ", ".join(header[:limit]) + more


def text_column(path: Path, header: list[str]) -> str:
    """The column of a CSV/TSV holding its texts when none is named: the one column, or the one
    named like text/question/sentence/... (exactly, else holding such a word), never an id
    column; otherwise a one-line refusal listing the columns."""
    how = f"pass --column NAME (column= in Python); columns: {column_list(header)}"
    usable = [h for h in header if h and not _is_id_name(h)]
    if len(header) == 1 and usable:
        return header[0]
    for matches in (
        [h for h in usable if "".join(map(_singular, _words(h))) in TEXT_NAMES],
        [h for h in usable if any(_singular(w) in TEXT_NAMES for w in _words(h))],
    ):
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise DataError(f"{path}: which column holds the texts, {' or '.join(matches)}? {how}")
    raise DataError(f"{path}: no column is named like texts (text, question, sentence, ...): {how}")


def _looks_like_ids(values: list[str]) -> bool:
    """Whole numbers only (row ids, question ids): not texts to compare."""
    values = [v.strip() for v in values if v.strip()]
    return bool(values) and all(re.fullmatch(r"[-+]?\d+", v) for v in values)


def read_texts(path: str | os.PathLike, column: str | None = None, *, skip_empty: bool = True) -> list[str]:
    """Read one text per line from a .txt file, or one column of a CSV/TSV (default: the one
    :func:`text_column` finds by its name). Empty texts are skipped, or with ``skip_empty=False``
    refused naming the file and line (so that the n-th text is the n-th line or row)."""
    return [text for _, text, _ in text_rows(path, column, skip_empty=skip_empty)]


def text_rows(
    path: str | os.PathLike,
    column: str | None = None,
    *,
    skip_empty: bool = True,
    fields: bool = False,
    skipped: list[int] | None = None,
) -> Iterator[tuple[int, str, dict[str, str]]]:
    """``(row number, text, other columns)`` for each text of a .txt file or a CSV/TSV column.

    The row number counts data rows from 1 (a .txt file's line, a CSV's record after the header);
    the other columns (a CSV's fields by header name, the text column left out) are collected
    only with ``fields=True``. The row numbers of empty texts skipped are appended to ``skipped``.
    Raises DataError for a missing file or column, a JSON file, and a file with no texts.
    """
    path = Path(path)
    if column is not None and not column.strip():  # '' would mean "find it" below
        raise DataError(f"{path}: the text column's name is empty; name a column, or leave --column out to find it")
    if path.suffix.lower() in (".json", ".jsonl", ".ndjson"):  # read as lines, each text would be a JSON record
        raise DataError(
            f"{path}: a JSON file; texts are read from a .txt file (one per line) or a CSV/TSV column: "
            "write the texts out as one of those"
        )
    found = False
    if path.suffix.lower() in (".csv", ".tsv"):
        with open_table(path, skip_blank=skip_empty) as (header, rows):  # its delimiter: table_delimiter
            name = column or text_column(path, header)
            if name not in header:
                raise DataError(f"{path}: no column {name!r} (found: {column_list(header)})")
            i = header.index(name)
            if column is None:  # a guessed column is looked at first: ids are never taken as texts
                head = list(itertools.islice(rows, _GUESS_ROWS))
                if _looks_like_ids([row[i] for _, row in head if len(row) > i]):
                    raise DataError(
                        f"{path}: column {name!r} holds ids, not texts: pass --column NAME "
                        f"(columns: {column_list(header)})"
                    )
                rows = itertools.chain(head, rows)
            for n, (line, row) in enumerate(rows, 1):
                if len(row) > i and row[i].strip():
                    check_utf8(row[i], path, line, name)
                    found = True
                    yield n, row[i], ({h: v for h, v in zip(header, row) if h != name} if fields else {})
                elif not skip_empty:
                    raise DataError(f"{path}:{line}: column {name!r}: empty text")
                elif skipped is not None:
                    skipped.append(n)
    else:
        with open_text(path) as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if line.strip():
                    check_utf8(line, path, n, "text")
                    found = True
                    yield n, line, {}
                elif not skip_empty:
                    raise DataError(f"{path}:{n}: empty line (one text per line)")
                elif skipped is not None:
                    skipped.append(n)
    if not found:
        raise DataError(f"{path}: no texts")


def split_pairs(pairs: Pairs, fractions: Sequence[float], *, seed: int = 0, stratify: bool = True) -> list[Pairs]:
    """Shuffle and cut into parts of the given fractions (the last part takes the rest).

    Stratified by label so each part keeps the positive rate of the whole.
    """
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(pairs.labels == y) for y in (0, 1)] if stratify else [np.arange(len(pairs))]
    parts: list[list[np.ndarray]] = [[] for _ in range(len(fractions) + 1)]
    for idx in groups:
        idx = rng.permutation(idx)
        cuts = np.cumsum([int(round(f * len(idx))) for f in fractions])
        for k, chunk in enumerate(np.split(idx, cuts)):
            parts[k].append(chunk)
    return [pairs.subset(rng.permutation(np.concatenate(p))) for p in parts]


def resolve_format(
    path: str | os.PathLike,
    format: str | PairFormat = "auto",
    text1: str | None = None,
    text2: str | None = None,
    label: str | None = None,
    delimiter: str | None = None,
    *,
    labelled: bool = True,
) -> PairFormat:
    """The format to read ``path`` with: named, given, or detected from its header (``"auto"``),
    with the named columns (and delimiter) overriding the format's. Without a ``delimiter``, a
    comma-separated format reads a file that :func:`~siamese.data.input_files.table_delimiter` finds
    tab-separated (a .tsv, or a .csv whose first line has tabs and no comma) with tabs."""
    if isinstance(format, PairFormat):
        fmt = format
    elif format == "auto":
        try:
            fmt = detect_format(path, labelled=labelled)
        except DataError:
            if not (text1 or text2 or label):
                raise
            fmt = FORMATS["generic"]
    elif format in FORMATS:
        fmt = FORMATS[format]
    else:
        raise DataError(f"unknown format {format!r}; choose one of: auto, {', '.join(FORMATS)}")
    overrides = {k: v for k, v in dict(text1=text1, text2=text2, label=label).items() if v}
    if delimiter is None and fmt.delimiter == "," and table_delimiter(path) == "\t":
        delimiter = "\t"
    if delimiter:
        overrides["delimiter"] = delimiter
    if overrides:
        fmt = PairFormat(**{**fmt.__dict__, **overrides})
    return fmt


def _is_float(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False
