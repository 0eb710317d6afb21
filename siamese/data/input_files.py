"""Opening a user's text file and reading its CSV/TSV rows strictly.

Python's ``csv`` module accepts malformed files silently: an unbalanced quote swallows the rows up
to the next quote into one field, a short or long row is just a short or long list, a repeated
header name shadows the other column, and TSV content read as CSV is one field per line. Every
reader of user files goes through here, so each of those stops with ``file:line: what``.

Encodings: UTF-8 (with or without a BOM), and UTF-16/UTF-32 when the file starts with their
byte-order mark. The whole file is checked before it is read (streamed, a chunk at a time): a NUL
byte (UTF-16 saved without a mark, a binary file) or an invalid UTF-8 sequence anywhere, in any
column, is refused as ``file:line``, so no bad byte reaches a JSON, CSV or terminal output.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from ..errors import DataError, SiameseError

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

_BOMS = [
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
]  # UTF-32 first: its LE mark starts like UTF-16's
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon"}


def input_error(path: Path, e: OSError) -> DataError:
    """An OSError met while reading ``path`` as a one-line error."""
    if isinstance(e, FileNotFoundError):
        return DataError(f"{path}: no such file")
    if isinstance(e, IsADirectoryError):
        return DataError(f"{path}: is a folder, not a file")
    return DataError(f"{path}: cannot read ({e.strerror or e})")


@contextlib.contextmanager
def open_text(path: str | os.PathLike) -> Iterator[TextIO]:
    """Open a text file for reading (``newline=""``, as csv wants), its encoding detected from
    its byte-order mark; OS and encoding problems become one-line :class:`DataError`\\ s."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a folder, not a file")
    try:
        with open(path, "rb") as raw:
            head = raw.read(1 << 16)
            encoding = next((name for bom, name in _BOMS if head.startswith(bom)), None)
            if encoding is not None:  # rare: decoded whole, so a bad byte is an error here, not mid-read
                try:
                    text = (head + raw.read()).decode(encoding)
                except UnicodeDecodeError as e:
                    raise DataError(f"{path}: not valid {encoding.upper()} (byte {e.start})") from None
                yield io.StringIO(text.removeprefix("\ufeff"), newline="")
                return
            raw.seek(0)
            check_utf8_stream(raw, path)
        with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            yield f
    except SiameseError:
        raise  # an error of the caller's own work (an output it could not write) is not this file's
    except OSError as e:
        raise input_error(path, e) from None


_CHUNK = 1 << 20


def check_utf8_stream(raw: BinaryIO, path: Path) -> None:
    """Read a binary file to its end, a chunk at a time, and refuse it at the first NUL byte or
    invalid UTF-8 sequence, naming the line (the whole file, not its start: a bad byte anywhere
    would otherwise reach the JSON, CSV or terminal output)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines = 1  # the line the current chunk starts on
    while True:
        chunk = raw.read(_CHUNK)
        nul = chunk.find(b"\0")
        if nul >= 0:
            line = lines + chunk.count(b"\n", 0, nul)
            raise DataError(
                f"{path}:{line}: holds NUL bytes: not a text file, or UTF-16 without a byte-order mark "
                "(save it as UTF-8)"
            )
        try:
            decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as e:
            # e.start counts from the bytes the decoder held back from the previous chunk
            at = max(0, e.start - len(e.object) + len(chunk))
            line = lines + chunk.count(b"\n", 0, at)
            raise DataError(f"{path}:{line}: not valid UTF-8 (byte 0x{e.object[e.start]:02x})") from None
        if not chunk:
            return
        lines += chunk.count(b"\n")


def check_utf8(text: str, path: Path, line: int, column: str) -> None:
    """Refuse a value holding bytes that were not UTF-8 (kept as surrogates by :func:`open_text`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(f"{path}:{line}: column '{column}' is not valid UTF-8") from None


def check_delimiter(path: Path, first_line: str, delimiter: str, remedy: str | None = None) -> None:
    """Refuse a file whose first line is not split by ``delimiter`` but is by another one (a .tsv
    holding commas, or a file read with a delimiter given for it that it does not use). ``remedy``:
    what makes it read (the caller knows why it reads with ``delimiter``); without one, the message
    says only what is sure to work."""
    if delimiter in first_line:
        return
    for other, name in _DELIMITER_NAMES.items():
        if other == ";" and other in first_line:  # no reader or --format takes semicolons
            raise DataError(
                f"{path}:1: the first line is semicolon-separated; siamese reads comma-separated (.csv) and "
                "tab-separated (.tsv) files only: save it with commas or tabs (a spreadsheet's CSV export "
                "with a comma as separator)"
            )
        if other != delimiter and other in first_line:
            read = _DELIMITER_NAMES.get(delimiter, repr(delimiter))
            if remedy is None and delimiter == "\t" and other == "," and Path(path).suffix.lower() == ".tsv":
                raise DataError(
                    f"{path}:1: the first line is comma-separated, but a .tsv file is read tab-separated "
                    "(rename it .csv)"
                )
            raise DataError(
                f"{path}:1: the first line is {name}-separated, but this file is read {read}-separated"
                + (f" ({remedy})" if remedy else "")
            )


def check_header(path: Path, header: list[str]) -> list[str]:
    """Stripped header names; a name given twice is an error (which column would be meant?)."""
    names = [h.strip() for h in header]
    seen: set[str] = set()
    for name in names:
        if name and name in seen:
            raise DataError(f"{path}:1: column {name!r} appears twice in the header")
        seen.add(name)
    return names


class Rows:
    """The rows of an open CSV/TSV file, each with the line it starts on, checked as they are read:
    a malformed quote (``strict``), and, when ``width`` is set, a row with another number of fields."""

    def __init__(
        self,
        f: TextIO,
        path: Path,
        *,
        delimiter: str = ",",
        quoting: int = csv.QUOTE_MINIMAL,
        width: int | None = None,
        at_least: bool = False,
        skip_blank: bool = True,
    ):
        self.path = path
        self.skip_blank = skip_blank  # False: a blank line comes out as [] (its line still counts)
        self.width = width
        self.at_least = at_least  # files without a header may carry extra trailing fields
        self._reader = csv.reader(f, delimiter=delimiter, quoting=quoting, strict=quoting != csv.QUOTE_NONE)
        self._end = 0  # the last physical line read

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        return self

    def __next__(self) -> tuple[int, list[str]]:
        while True:
            start = self._end + 1
            try:
                row = next(self._reader)
            except csv.Error as e:
                raise DataError(self._malformed(start, self._reader.line_num, str(e))) from None
            self._end = self._reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                if self.skip_blank:
                    continue
                return start, []
            if self.width is not None and (len(row) < self.width or (len(row) > self.width and not self.at_least)):
                what = f"expected {'at least ' if self.at_least else ''}{self.width} fields, found {len(row)}"
                raise DataError(self._malformed(start, self._end, what))
            return start, row

    def _malformed(self, start: int, end: int, what: str) -> str:
        if end > start:  # the row ran over several lines: a quote opened and never closed where it should
            return (
                f"{self.path}:{start}: unbalanced quote: the quoted field starting on this line runs to line {end} "
                f"({what})"
            )
        return f"{self.path}:{end}: {what}"


@contextlib.contextmanager
def open_table(
    path: str | os.PathLike,
    *,
    delimiter: str | None = None,
    quoting: int = csv.QUOTE_MINIMAL,
    columns: list[str] | tuple[str, ...] | None = None,
    skip_blank: bool = True,
    remedy: str | None = None,
) -> Iterator[tuple[list[str], Rows]]:
    """Open a CSV/TSV file: ``(header, rows)``. The header is its first line (checked for
    duplicate names and for the delimiter: ``delimiter``, by default the one :func:`table_delimiter`
    tells from the file; ``remedy`` is what a mismatch's message suggests), or ``columns`` for
    files without one; every row must have as many fields as the header (at least as many without
    a header line)."""
    path = Path(path)
    with open_text(path) as f:
        first = f.readline()
        if not first.strip():
            raise DataError(
                f"{path}: file is empty" if not first else f"{path}:1: empty first line (expected the header)"
            )
        if delimiter is None:
            delimiter = table_delimiter(path, first)
        check_delimiter(path, first, delimiter, remedy)
        f.seek(0)
        rows = Rows(f, path, delimiter=delimiter, quoting=quoting, skip_blank=skip_blank)
        if columns is None:
            try:
                _, header = next(rows)
            except StopIteration:
                raise DataError(f"{path}: file is empty") from None
            header = check_header(path, header)
            rows.width = len(header)
        else:
            header = list(columns)
            rows.width, rows.at_least = len(header), True
        yield header, rows


def table_delimiter(path: str | os.PathLike, first: str | None = None) -> str:
    """The delimiter a CSV/TSV file is read with, the same for every reader: tab for a .tsv file,
    and for a file of another name (.csv) whose first line (``first``, read from the file when not
    given) holds tabs and no comma (TSV saved as .csv: no comma-separated header is one name with
    tabs in it); comma otherwise, so a CSV's quoted texts may hold tabs."""
    if Path(path).suffix.lower() == ".tsv":
        return "\t"
    if first is None:
        first = peek_first_line(path)
    return "\t" if "\t" in first and "," not in first else ","


def peek_first_line(path: str | os.PathLike) -> str:
    """The start of a file's first line, decoded as :func:`open_text` would, without checking the
    rest of the file ("" when it cannot be read: the reader that follows says why)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(1 << 16)
    except OSError:
        return ""
    encoding = next((name for bom, name in _BOMS if head.startswith(bom)), "utf-8-sig")
    text = head.decode(encoding, errors="replace").removeprefix("\ufeff")
    return text.split("\n", 1)[0].split("\r", 1)[0]


def first_line(path: str | os.PathLike) -> str:
    """The first line of a text file (without its end of line); an empty file is an error."""
    path = Path(path)
    with open_text(path) as f:
        line = f.readline().rstrip("\r\n")
    if not line:
        raise DataError(f"{path}: file is empty")
    return line


def count_lines(path: str | os.PathLike) -> int:
    """How many lines a file holds (a last line without its line end counts), read in chunks; 0
    when it cannot be read (the reader that follows names the problem)."""
    lines, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return 0
    return lines + (last != b"\n")
