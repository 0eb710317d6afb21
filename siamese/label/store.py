"""The labels file: an append-only CSV ``text1,text2,label,id1,id2,similarity,time`` that
``siamese train``, ``calibrate`` and ``evaluate`` read as generic pairs.

Every answer is one row, written with one ``write`` and fsynced before :meth:`LabelStore.add`
returns, so a killed server loses no answer it acknowledged. Writers (threads of one server, or
several processes) take an exclusive ``flock`` on the file itself and first read what the others
appended since, so a pair is written once however many tabs or processes answer it. A pair is
the same pair in either order and after collapsing whitespace. Undo rewrites the file without
its row, atomically (temporary file, fsync, rename) under the same lock.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..data.records import normalise
from ..errors import DataError, OutputError
from ..io.atomic import fsync_dir

COLUMNS = ("text1", "text2", "label", "id1", "id2", "similarity", "time")


def pair_key(text1: str, text2: str) -> tuple[str, str]:
    """The pair whatever its order and spacing: what two answers must not both be about."""
    a, b = normalise(text1), normalise(text2)
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class Answer:
    text1: str
    text2: str
    label: int  # 1 = duplicate, 0 = not
    id1: str = ""
    id2: str = ""
    similarity: float = math.nan
    time: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return pair_key(self.text1, self.text2)

    def row(self) -> bytes:
        out = io.StringIO()
        values = astuple(self)
        similarity = "" if math.isnan(self.similarity) else f"{self.similarity:.6f}"
        csv.writer(out, lineterminator="\n").writerow([*values[:5], similarity, values[6]])
        return out.getvalue().encode("utf-8")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class LabelStore:
    """The answers of one labels file, kept in step with the file before every change."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.answers: list[Answer] = []
        self.keys: set[tuple[str, str]] = set()
        self._seen = (None, 0)  # (inode, bytes) of the file as last read
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise OutputError(f"{self.path}: a folder is there, not a labels file")
        with self._locked():
            pass  # creates the file with its header, or reads (and checks) the answers already there

    def __len__(self) -> int:
        return len(self.answers)

    def version(self) -> tuple:
        """Changes whenever the file does (an answer added or undone, here or by another writer)."""
        return self._seen

    def add(self, answer: Answer) -> bool:
        """Append ``answer`` (False, and nothing written, when its pair was answered already)."""
        with self._locked() as fd:
            if answer.key in self.keys:
                return False
            data = answer.row()
            os.write(fd, data)
            os.fsync(fd)
            self._seen = (self._seen[0], self._seen[1] + len(data))
            self._take(answer)
            return True

    def undo(self, key: tuple[str, str] | None = None) -> Answer | None:
        """Remove the answer about ``key`` (default: the last one written); returns it (None: none)."""
        with self._locked():
            if not self.answers:
                return None
            at = (
                len(self.answers) - 1
                if key is None
                else next((i for i, a in enumerate(self.answers) if a.key == key), None)
            )
            if at is None:
                return None
            gone = self.answers.pop(at)
            self.keys.discard(gone.key)
            self._rewrite()
            return gone

    def refresh(self) -> None:
        """Read what other writers appended."""
        with self._locked():
            pass

    # -- the file ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The file open for appending, flocked, and read up to its end."""
        with self._lock:
            while True:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
                except OSError as e:
                    raise OutputError(f"{self.path}: cannot open the labels file ({e.strerror or e})") from None
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    if os.fstat(fd).st_ino != _inode(self.path):  # rewritten (undo) while we waited
                        continue
                    self._catch_up(fd)
                    yield fd
                    return
                finally:
                    os.close(fd)  # closing releases the lock

    def _catch_up(self, fd: int) -> None:
        info = os.fstat(fd)
        inode, done = self._seen
        if info.st_size == 0:
            header = (",".join(COLUMNS) + "\n").encode()
            os.write(fd, header)
            os.fsync(fd)
            fsync_dir(self.path.parent)
            self.answers, self.keys, self._seen = [], set(), (info.st_ino, len(header))
            return
        if inode != info.st_ino or info.st_size < done:
            self.answers, self.keys, done = [], set(), 0
        if info.st_size == done:
            return
        data = os.pread(fd, info.st_size - done, done)
        if done == 0:
            first, _, rest = data.partition(b"\n")
            self._check_header(first)
            body, offset = rest, len(first) + 1
        else:
            body, offset = data, done
        for answer in self._parse(body, done == 0):
            self._take(answer)
        self._seen = (info.st_ino, offset + len(body))

    def _check_header(self, first: bytes) -> None:
        header = next(csv.reader([first.decode("utf-8", "replace").rstrip("\r")]), [])
        if [h.strip() for h in header[: len(COLUMNS)]] != list(COLUMNS):
            raise DataError(
                f"{self.path}: not a labels file (its header is {first[:80].decode('utf-8', 'replace')!r}, "
                f"expected {','.join(COLUMNS)}); give --out a new file or one this command wrote"
            )

    def _parse(self, body: bytes, whole: bool) -> Iterator[Answer]:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{self.path}: not valid UTF-8 (byte {e.start})") from None
        start = 2 if whole else len(self.answers) + 2  # the file line of the first row (header = 1)
        for n, row in enumerate(csv.reader(io.StringIO(text, newline="")), start):
            if not row:
                continue
            if len(row) < len(COLUMNS) or row[2].strip() not in ("0", "1"):
                raise DataError(f"{self.path}: row {n}: expected {','.join(COLUMNS)} with a 0/1 label, got {row[:7]!r}")
            try:
                similarity = float(row[5]) if row[5].strip() else math.nan
            except ValueError:
                raise DataError(f"{self.path}: row {n}: column 'similarity' is not a number: {row[5]!r}") from None
            yield Answer(row[0], row[1], int(row[2]), row[3], row[4], similarity, row[6])

    def _take(self, answer: Answer) -> None:
        if answer.key not in self.keys:  # a file edited by hand may repeat a pair: the first answer counts
            self.keys.add(answer.key)
            self.answers.append(answer)

    def _rewrite(self) -> None:
        """The file again with the answers kept, swapped in atomically (we hold its lock)."""
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            data = (",".join(COLUMNS) + "\n").encode() + b"".join(a.row() for a in self.answers)
            os.write(fd, data)
            os.fchmod(fd, os.stat(self.path).st_mode & 0o777)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(name, self.path)
            fsync_dir(self.path.parent)
            self._seen = (_inode(self.path), len(data))
        finally:
            if fd >= 0:
                os.close(fd)
            if os.path.exists(name):
                os.unlink(name)


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def answer(text1: str, text2: str, label: int, id1="", id2="", similarity=math.nan) -> Answer:
    return Answer(text1, text2, int(label), str(id1), str(id2), float(similarity), now())


__all__ = ["COLUMNS", "Answer", "LabelStore", "answer", "pair_key"]
