"""The labels file: an append-only CSV ``text1,text2,label,id1,id2,similarity,time`` that
``siamese train``, ``calibrate`` and ``evaluate`` read as generic pairs.

Every answer is one row, written with one ``write`` and fsynced before :meth:`LabelStore.add`
returns, so a killed server loses no answer it acknowledged; a write that fails (a full disk, a
file-size limit) is cut off again, so the file never keeps half a row, and the answer is refused.
Writers (threads of one server, or several processes) take an exclusive ``flock`` on the file
itself and first read what the others appended since, so a pair is written once however many
tabs or processes answer it. A pair is the same pair in either order and after collapsing
whitespace. Undo rewrites the file without its row, atomically (temporary file, fsync, rename)
under the same lock; the temporary file of an undo killed midway is removed by the next store.
A new file, and the folders it goes in, is made by the first answer: opening a store only checks
that it can be, so a command that stops before its first answer leaves nothing behind.

A file edited by hand may lack its final line end (the next row starts on a new line) or end its
lines with CR only. A last row cut short by a crash (power loss mid-write) is moved, as it was, to
``LABELS.torn.txt`` beside the file, so that the file reads again; nothing is lost.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import logging
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..data.records import normalise
from ..errors import DataError, OutputError
from ..io.atomic import check_file_target, create_new, fsync_dir, unused_name

COLUMNS = ("text1", "text2", "label", "id1", "id2", "similarity", "time")
log = logging.getLogger("siamese.label")
_LINE_END = re.compile(rb"\r\n|\n|\r")


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
        self._ends_line = True  # whether the file as last read ends with a line end
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise OutputError(f"{self.path}: a folder is there, not a labels file")
        with self._locked(create=False) as fd:  # reading (and checking) the answers already there
            if fd is not None:
                self._clear_killed_undo()
        if fd is None:
            self._check_can_create()

    @property
    def torn_file(self) -> Path:
        """Where a last row cut short by a crash is kept (see the module docstring)."""
        return self.path.with_name(f"{self.path.stem}.torn.txt")

    def __len__(self) -> int:
        return len(self.answers)

    def version(self) -> tuple:
        """Changes whenever the file does (an answer added or undone, here or by another writer)."""
        return self._seen

    def add(self, answer: Answer) -> bool:
        """Append ``answer`` (False, and nothing written, when its pair was answered already).
        A write that fails is undone (the file is cut back) and raised as an :class:`OutputError`."""
        with self._locked() as fd:
            assert fd is not None  # made if it was not there
            if answer.key in self.keys:
                return False
            data = answer.row() if self._ends_line else b"\n" + answer.row()
            inode, size = self._seen
            try:
                view = memoryview(data)
                while view:  # os.write may write part of it (a full disk): the rest, or the error
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # the row is whole or absent
                    os.fsync(fd)
                raise OutputError(
                    f"{self.path}: cannot write the answer ({e.strerror or e}); it was not saved"
                ) from None
            self._seen, self._ends_line = (inode, size + len(data)), True
            self._take(answer)
            return True

    def undo(self, key: tuple[str, str] | None = None) -> Answer | None:
        """Remove the answer about ``key`` (default: the last one written); returns it (None: none)."""
        with self._locked(create=False):
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
            try:
                self._rewrite()
            except OutputError:
                self.answers.insert(at, gone)
                self.keys.add(gone.key)
                raise
            return gone

    def refresh(self) -> None:
        """Read what other writers appended."""
        with self._locked(create=False):
            pass

    # -- the file ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, create: bool = True) -> Iterator[int | None]:
        """The file open for appending, flocked, and read up to its end; made (with its folders) when it is not
        there, or with ``create=False`` None (no answers)."""
        with self._lock:
            made_folders = False
            while True:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0), 0o666)
                except FileNotFoundError as e:
                    if not create:
                        self.answers, self.keys, self._seen, self._ends_line = [], set(), (None, 0), True
                        yield None
                        return
                    if made_folders:
                        raise OutputError(f"{self.path}: cannot open the labels file ({e.strerror or e})") from None
                    self._make_folders()
                    made_folders = True
                    continue
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

    def _check_can_create(self) -> None:
        """Refuse, before any work, a new labels file that could not be made (a file where a folder should be, a
        read-only folder); nothing is left there."""
        check_file_target(self.path, overwrite=True)  # not there yet: only whether it can be written

    def _make_folders(self) -> None:
        """The folders the labels file goes in (``--out lab/labels.csv``), as ``train --out a/b`` makes its own."""
        missing = []
        folder = self.path.absolute().parent
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        try:
            self.path.absolute().parent.mkdir(parents=True, exist_ok=True)
            for made in reversed(missing):
                fsync_dir(made.parent)
        except OSError as e:
            raise OutputError(f"{self.path}: cannot make its folder {self.path.parent} ({e.strerror or e})") from None

    def _catch_up(self, fd: int) -> None:
        info = os.fstat(fd)
        inode, done = self._seen
        if info.st_size == 0:
            header = (",".join(COLUMNS) + "\n").encode()
            os.write(fd, header)
            os.fsync(fd)
            fsync_dir(self.path.parent)
            self.answers, self.keys, self._seen, self._ends_line = [], set(), (info.st_ino, len(header)), True
            return
        if inode != info.st_ino or info.st_size < done:
            self.answers, self.keys, done = [], set(), 0
        if info.st_size == done:
            return
        data = os.pread(fd, info.st_size - done, done)
        body, offset = data, done
        if done == 0:
            end = _LINE_END.search(data)  # a header-only file may end without its line end
            first = data[: end.start()] if end else data
            self._check_header(first)
            body, offset = (data[end.end() :], end.end()) if end else (b"", len(data))
        answers, torn = self._parse(body, offset, done == 0)
        if torn is not None:
            self._set_aside(fd, torn, data[torn - done :])
        for answer in answers:
            self._take(answer)
        self._seen = (info.st_ino, torn if torn is not None else info.st_size)
        self._ends_line = torn is not None or data.endswith((b"\n", b"\r")) or not data

    def _check_header(self, first: bytes) -> None:
        try:
            header = next(csv.reader([first.decode("utf-8", "replace")]), [])
        except csv.Error:
            header = []
        if [h.strip() for h in header[: len(COLUMNS)]] != list(COLUMNS):
            raise DataError(
                f"{self.path}: not a labels file (its header is {first[:80].decode('utf-8', 'replace')!r}, "
                f"expected {','.join(COLUMNS)}); give --out a new file or one this command wrote"
            )

    def _parse(self, body: bytes, offset: int, whole: bool) -> tuple[list[Answer], int | None]:
        """The answers in ``body`` (the file from byte ``offset``), and where a last row cut short
        by a crash starts (None: none is)."""
        start = 2 if whole else len(self.answers) + 2  # the file line of the first row (header = 1)
        nul = body.find(b"\0")
        if nul >= 0:
            line = start + len(_LINE_END.findall(body, 0, nul))
            raise DataError(f"{self.path}:{line}: holds a NUL byte: not a labels file this command wrote")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{self.path}: not valid UTF-8 (byte {offset + e.start})") from None
        lines = io.StringIO(text, newline="").readlines()  # as csv splits them: CR, LF or CRLF
        ends = [0]
        for physical in lines:
            ends.append(ends[-1] + len(physical.encode("utf-8")))
        reader = csv.reader(iter(lines), strict=True)
        answers, n, used = [], start, 0
        while True:
            try:
                row = next(reader)
                error = None
            except StopIteration:
                break
            except csv.Error as e:
                row, error = None, str(e)
            first_line, used = used, reader.line_num
            last = used >= len(lines)
            problem = error or (row and _row_problem(row))
            if problem and last and not text.endswith(("\n", "\r")):
                return answers, offset + ends[first_line]  # a row cut short: set aside
            if problem:
                raise DataError(f"{self.path}: row {n}: {problem}")
            if row:
                answers.append(Answer(row[0], row[1], int(row[2]), row[3], row[4], _similarity(row[5]), row[6]))
            n += 1
            if error:
                break
        return answers, None

    def _set_aside(self, fd: int, at: int, torn: bytes) -> None:
        """A last row cut short (we hold the lock: no writer is alive midway) goes to the torn file."""
        try:
            with open(self.torn_file, "ab") as f:
                f.write(torn + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.ftruncate(fd, at)
            os.fsync(fd)
        except OSError as e:
            raise OutputError(
                f"{self.path}: its last row was cut short by a crash, and moving it to {self.torn_file.name} "
                f"failed ({e.strerror or e})"
            ) from None
        log.warning("%s: its last row was cut short (a crash while writing); moved to %s", self.path, self.torn_file)

    def _clear_killed_undo(self) -> None:
        """The temporary copy an undo killed midway left (we hold the lock: no undo is running)."""
        killed = re.compile(rf"\.{re.escape(self.path.name)}\.[a-z0-9_]{{8}}\.tmp")
        with contextlib.suppress(OSError):
            for name in os.listdir(self.path.parent):
                if killed.fullmatch(name):
                    (self.path.parent / name).unlink(missing_ok=True)

    def _take(self, answer: Answer) -> None:
        if answer.key not in self.keys:  # a file edited by hand may repeat a pair: the first answer counts
            self.keys.add(answer.key)
            self.answers.append(answer)

    def _rewrite(self) -> None:
        """The file again with the answers kept, swapped in atomically (we hold its lock); a write
        that fails leaves the file as it was and raises an :class:`OutputError`."""
        name = unused_name(self.path.parent, self.path.name, ".tmp")
        fd = -1
        try:
            fd = create_new(name)
            data = (",".join(COLUMNS) + "\n").encode() + b"".join(a.row() for a in self.answers)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, os.stat(self.path).st_mode & 0o777)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(name, self.path)
            fsync_dir(self.path.parent)
            self._seen, self._ends_line = (_inode(self.path), len(data)), True
        except OSError as e:
            raise OutputError(
                f"{self.path}: cannot rewrite it for the undo ({e.strerror or e}); nothing was undone"
            ) from None
        finally:
            if fd >= 0:
                os.close(fd)
            if os.path.exists(name):
                os.unlink(name)


def _row_problem(row: list[str]) -> str | None:
    """What is wrong with a labels row (None: nothing)."""
    if len(row) < len(COLUMNS) or row[2].strip() not in ("0", "1"):
        return f"expected {','.join(COLUMNS)} with a 0/1 label, got {row[:7]!r}"
    if row[5].strip():
        try:
            float(row[5])
        except ValueError:
            return f"column 'similarity' is not a number: {row[5]!r}"
    return None


def _similarity(value: str) -> float:
    return float(value) if value.strip() else math.nan


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def answer(text1: str, text2: str, label: int, id1="", id2="", similarity=math.nan) -> Answer:
    return Answer(text1, text2, int(label), str(id1), str(id2), float(similarity), now())


__all__ = ["COLUMNS", "Answer", "LabelStore", "answer", "pair_key"]
