"""Atomic writes: a folder or file appears complete under its name, the old one or the new one,
whatever the instant of a crash; nothing that is not ours is ever deleted.

A folder is written beside its target as ``.NAME.siamese-XXXXXXXX.tmp``; every file and folder in
it is fsynced, then it is swapped with the old folder in one ``renameat2(RENAME_EXCHANGE)`` (Linux
>= 3.15, called through ctypes), so at every instant NAME holds a complete folder; the old one,
now under the temporary name, is deleted afterwards, and the parent folder fsynced. Where the
exchange is not available (another OS, a file system without it) two renames do it (NAME ->
``.NAME.old-PID``, then the new one -> NAME): a crash between them leaves the old folder under
``.old-PID``, and the next write restores it before anything else.

Writers of one target take an exclusive ``flock`` on ``.NAME.lock`` beside it (released by the
kernel when the process dies, so a lock is never stale): a second writer waits for the first (up
to ``$SIAMESE_LOCK_TIMEOUT`` seconds, default 120) and then fails with a clear error. Holding the
lock, a writer knows that no other is alive, so every ``.NAME.*.tmp`` and ``.NAME.old-*`` left by
a killed one is stale and removed. The last holder deletes the lock file while still holding
it; a writer that was waiting on the deleted file sees that its inode is no longer the path's
and takes the lock again on the new file, so nothing is left behind.

Writing over an existing folder requires that it is empty or a siamese folder (a ``config.json``,
``index.json`` or dedupe ``run.json`` whose ``format`` starts with ``siamese-``), or ``overwrite=True``
(``--overwrite``). A killed write's leftovers are also deleted by the next command that reads the
target (:func:`clear_leftovers`), when no live writer holds its lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import OutputError, SiameseError

MANIFESTS = ("config.json", "index.json", "run.json")  # model, index, dedupe run
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def lock_timeout() -> float:
    try:
        return float(os.environ.get("SIAMESE_LOCK_TIMEOUT", "120"))
    except ValueError:
        raise OutputError(
            f"$SIAMESE_LOCK_TIMEOUT must be a number of seconds, got {os.environ['SIAMESE_LOCK_TIMEOUT']!r}"
        ) from None


def output_error(path: Path, e: OSError, tmp: Path | None = None) -> OutputError:
    """An OSError met while writing ``path`` as a one-line error. A file inside the temporary
    folder ``tmp`` is named as it will be inside ``path`` (the user knows that name)."""
    if isinstance(e, OutputError):
        return e
    where = Path(e.filename) if e.filename else path
    if tmp is not None and where.is_relative_to(tmp):
        where = path / where.relative_to(tmp)
    return OutputError(f"{where}: cannot write ({e.strerror or e})")


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """A failed write (or flush, or close) raises an OSError without a file name, the Rust writers
    (tokenizers, safetensors) another exception: an OSError naming ``path``."""
    try:
        yield
    except Exception as e:
        error = as_os_error(e)
        if error is None or error.filename or isinstance(e, SiameseError):
            raise
        raise OSError(error.errno, error.strerror or str(error), str(path)) from None


_RUST_OS_ERROR = re.compile(r"os error (\d+)|Os \{ code: (\d+)")


def as_os_error(e: BaseException) -> OSError | None:
    """``e`` as an OSError when it reports one: tokenizers' ``Exception("File too large (os error
    27)")`` and safetensors' ``SafetensorError(... IoError(Os { code: 28, ...}))`` are OS errors
    raised as other exceptions by their Rust code."""
    if isinstance(e, OSError):
        return e
    if isinstance(e, SiameseError):  # a message of ours, which may quote anything
        return None
    found = _RUST_OS_ERROR.search(str(e))
    if found is None:
        return None
    code = int(found.group(1) or found.group(2))
    return OSError(code, os.strerror(code))


def check_writable(target: Path) -> None:
    """Refuse, before any work, a target whose nearest existing folder cannot take a new file (a
    read-only folder or file system, no permission, a full disk): the one check that is sure is to
    create a file there, which is removed at once."""
    parent = target.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    probe = unused_name(parent, target.name, ".check")
    try:
        os.close(create_new(probe))
    except OSError as e:
        raise OutputError(f"{target}: cannot write there ({e.strerror or e}: {parent})") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only file system refuses even a missing name's unlink
            probe.unlink(missing_ok=True)


def unused_name(folder: Path, name: str, suffix: str, infix: str = "") -> Path:
    """``folder/.NAME.{infix}XXXXXXXX{suffix}``, a name nothing has yet, for a temporary file or folder
    the caller then creates. The caller holds the name before the file exists: mkstemp and mkdtemp
    give it only after creating it, and a SIGTERM in between left the file with no one to remove it."""
    while True:
        path = folder / f".{name}.{infix}{secrets.token_hex(4)}{suffix}"
        if not os.path.lexists(path):
            return path


def create_new(path: Path) -> int:
    """Create the file an :func:`unused_name` names, private (0600), only if nothing is there; its fd."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


KINDS = {"config.json": "model", "index.json": "index", "run.json": "dedupe run"}
# What siamese writes at the top of a folder it owns (model, sentence-transformers layout, training
# checkpoint, ONNX export, index, dedupe run): anything else there is the user's, and a re-save
# that would delete it is refused.
OWN_NAMES = frozenset(
    {
        "config.json",
        "README.md",  # the model card (siamese.models.card)
        "history.png",
        "test.csv",  # train --test-fraction's held-out split
        "model.safetensors",
        "tokenizer.json",
        "model.onnx",
        "prior",
        "modules.json",
        "config_sentence_transformers.json",
        "sentence_bert_config.json",
        "0_Transformer",
        "1_Pooling",
        "2_Normalize",
        "trainer_state.json",
        "trainer_state.safetensors",
        "index.json",
        "index.faiss",
        "texts.jsonl",
        "lists.ivfdata",
        "shards",
        "run.json",
        "result.json",
        "records.jsonl",
        "reference.jsonl",
        "pairs.npz",
        "vectors.npy",
        "clusters.jsonl",
        "matches.jsonl",
    }
)


def siamese_kind(folder: Path) -> str | None:
    """What siamese folder ``folder`` is ("model", "index", "dedupe run"), or None."""
    for name in MANIFESTS:
        try:
            raw = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(raw, dict) and str(raw.get("format", "")).startswith("siamese-"):
            return KINDS[name]
    return None


def check_not_input(out: str | os.PathLike, inputs) -> None:
    """The one rule for every output (file or folder), with or without --overwrite: it must not be,
    hold, or lie inside any of the command's ``inputs`` (the files and folders it reads; None and
    paths that do not exist are skipped), symbolic links followed."""
    out = Path(out)
    mine = out.resolve()
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        theirs = Path(given).resolve()
        if mine == theirs or (out.exists() and os.path.samefile(out, given)):
            if theirs.is_dir():
                raise OutputError(f"{out}: is the folder this command reads; write to another folder")
            raise OutputError(f"{out}: is this command's input (this command reads it); write the output elsewhere")
        if theirs.is_relative_to(mine):
            raise OutputError(f"{out}: holds {given}, which this command reads; write the output elsewhere")
        if mine.is_relative_to(theirs):
            raise OutputError(f"{out}: lies inside {given}, which this command reads; write the output elsewhere")


def check_file_target(path: str | os.PathLike, *, overwrite: bool = False, inputs=()) -> Path:
    """Refuse an output file that would replace something of the user's: an existing file (unless
    ``overwrite``), a folder, or one of the command's ``inputs`` (even with ``overwrite``; see
    :func:`check_not_input`)."""
    path = Path(path)
    _check_parent(path)
    if path.is_dir():
        raise OutputError(f"{path}: a folder is there, not a file")
    check_not_input(path, inputs)
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise OutputError(
            f"{path}: a file is already there; choose another name, or pass --overwrite (overwrite=True in Python) "
            "to replace it"
        )
    check_writable(_through_link(path))
    return path


def _check_parent(target: Path) -> None:
    """The nearest existing folder above ``target`` must be a folder, not a file."""
    parent = target.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{target}: cannot write there ({parent} is a file, not a folder)")


def check_target(target: Path, *, overwrite: bool = False, kind: str | None = None, can_overwrite: bool = True) -> None:
    """Refuse a target that is a file, a folder holding anything but a siamese folder, or a siamese
    folder of another ``kind`` than the one to be written (a model over an index; unless ``overwrite``).
    ``can_overwrite``: whether the caller takes ``overwrite`` (its messages offer it only then)."""
    hint = ", or pass --overwrite (overwrite=True in Python) to replace it" if can_overwrite else ""
    here = Path.cwd().resolve()
    if here.is_relative_to(target.resolve()):  # `--out .`: the folder is swapped whole, from under the shell
        raise OutputError(f"{target}: is the folder you are in, or holds it; write to a folder of its own")
    _check_parent(target)
    if target.is_symlink() and not target.exists():
        raise OutputError(f"{target}: a broken symbolic link is there, not a folder")
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: a file is there, not a folder")
    found = siamese_kind(target) if target.is_dir() else None
    if found is not None and kind is not None and found != kind and not overwrite:
        article = "an" if kind[0] in "aeiou" else "a"
        raise OutputError(
            f"{target}: holds a siamese {found}, which writing {article} {kind} would replace; "
            f"choose another folder{hint}"
        )
    if target.is_dir() and not overwrite:
        # a siamese folder may hold only what siamese writes; any other folder must be empty
        try:
            theirs = sorted(p.name for p in target.iterdir() if found is None or p.name not in OWN_NAMES)
        except OSError as e:
            raise output_error(target, e) from None
        if theirs:
            shown = ", ".join(theirs[:5]) + (", ..." if len(theirs) > 5 else "")
            what = (
                f"the {found} folder also holds files siamese did not write ({shown}), which replacing it would delete"
                if found
                else f"the folder holds files siamese did not write ({shown})"
            )
            raise OutputError(f"{target}: {what}; move them or choose another folder{hint}")
    if target.resolve() == Path(target.resolve().anchor):
        raise OutputError(f"{target}: cannot replace the root folder")
    check_writable(_through_link(target))


def _through_link(target: Path) -> Path:
    """A symbolic link to an existing file or folder is written through: its target is replaced
    (as ``cp`` or a shell's ``>`` would), and the link stays."""
    return Path(os.path.realpath(target)) if target.is_symlink() and target.exists() else target


_held: set[tuple[str, int]] = set()  # (lock file, thread) held by this process: target_lock is re-entrant


@contextlib.contextmanager
def target_lock(target: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock of ``target`` (``.NAME.lock`` beside it), waiting up to ``timeout`` seconds.

    Re-entrant in one thread: a read-modify-write (``index add``) holds it while it reads the
    folder, and the atomic write inside it goes on under the same lock."""
    timeout = lock_timeout() if timeout is None else timeout
    lock = Path(os.path.abspath(target)).with_name(f".{Path(target).name}.lock")
    key = (str(lock), threading.get_ident())
    if key in _held:
        yield
        return
    with _flock(lock, target, timeout):
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)


@contextlib.contextmanager
def _flock(lock: Path, target: Path, timeout: float) -> Iterator[None]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise output_error(lock, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise OutputError(
                    f"{target}: another process is writing it (lock {lock.name} held for "
                    f"{timeout:g} s; $SIAMESE_LOCK_TIMEOUT sets the wait)"
                ) from None
            time.sleep(0.05)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder deleted this file: lock the new one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)  # releases the lock


def _leftover_patterns(target: Path) -> tuple[re.Pattern, re.Pattern]:
    """The names a killed write of ``target`` leaves: a temporary folder (atomic_dir) or file
    (atomic_file, ``.NAME.XXXXXXXX.tmp`` as :func:`unused_name` names it), and a hidden old folder."""
    name = re.escape(target.name)
    return (
        re.compile(rf"\.{name}\.(siamese-[a-z0-9_]+\.tmp|[a-z0-9_]{{8}}\.(tmp|check))"),
        re.compile(rf"\.{name}\.old-\d+"),
    )


def clear_leftovers(target: str | os.PathLike) -> None:
    """What a killed write of ``target`` left beside it (temporary folder or file, lock file, old
    folder) is deleted, if no live writer holds its lock; called by every command that reads or
    writes ``target``. A live writer, a read-only folder: nothing is touched."""
    target = Path(os.path.abspath(target))
    stale_tmp, stale_old = _leftover_patterns(target)
    lock = f".{target.name}.lock"
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    if not any(n == lock or stale_tmp.fullmatch(n) or stale_old.fullmatch(n) for n in names):
        return
    try:
        with target_lock(target, timeout=0):  # not waiting: a held lock means a live writer
            recover(target)
    except (OutputError, OSError):
        pass


def recover(target: Path) -> None:
    """With the lock held: put back an old folder a crash left hidden, delete stale temporary folders and files."""
    stale_tmp, stale_old = _leftover_patterns(target)
    olds = sorted((p for p in target.parent.iterdir() if stale_old.fullmatch(p.name)), key=lambda p: p.stat().st_mtime)
    if olds and not target.exists() and not target.is_symlink():
        os.replace(olds.pop(), target)  # the fallback crashed between its two renames
    for p in target.parent.iterdir():
        if stale_tmp.fullmatch(p.name) or stale_old.fullmatch(p.name):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


def fsync_tree(root: Path) -> None:
    """Flush every file and folder under ``root`` (and ``root``) to disk."""
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(folder))


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _renameat2():
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_exchange_fn = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step; False where the system cannot (then nothing changed)."""
    if _exchange_fn is None:
        return False
    if _exchange_fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _publish(tmp: Path, target: Path) -> None:
    """Put the complete folder ``tmp`` under ``target``'s name (see the module docstring)."""
    if target.exists() or target.is_symlink():
        if exchange(tmp, target):
            fsync_dir(target.parent)
            shutil.rmtree(tmp, ignore_errors=True)  # the old folder, now under the temporary name
            return
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(tmp, target)
        fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)
        fsync_dir(target.parent)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, *, overwrite: bool = False, kind: str | None = None) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target`` atomically.

    ``target`` must not exist, be empty, or be a siamese folder (of ``kind``, when given), unless
    ``overwrite``; a symbolic link to a folder is written through (the folder it names is
    replaced, the link stays). OS errors, also those the Rust writers (tokenizers, safetensors)
    raise as other exceptions, become one-line :class:`OutputError`\\ s naming the file, and
    nothing is published: every file is flushed and fsynced before the swap."""
    target = Path(os.path.abspath(target))
    check_target(target, overwrite=overwrite, kind=kind)
    target = _through_link(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_error(target.parent, e) from None
    with target_lock(target):
        tmp = None
        try:
            recover(target)
            check_target(
                target, overwrite=overwrite, kind=kind
            )  # another writer may have put something there meanwhile
            tmp = unused_name(target.parent, target.name, ".tmp", infix="siamese-")
            os.mkdir(tmp, 0o700)
            yield tmp
            umask = _umask()
            os.chmod(tmp, 0o777 & ~umask)
            for f in tmp.rglob("*"):  # subfolders too (a transformer model's 0_Transformer/)
                os.chmod(f, (0o777 if f.is_dir() else 0o666) & ~umask)
            fsync_tree(tmp)
            _publish(tmp, target)
            tmp = None
        except Exception as e:
            error = as_os_error(e)
            if error is None:
                raise
            raise output_error(target, error, tmp) from None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it is fsynced and renamed over
    ``target`` (through a symbolic link to a file: the file it names is replaced)."""
    target = _through_link(Path(os.path.abspath(target)))
    if target.is_dir():
        raise OutputError(f"{target}: a folder is there, not a file")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_error(target.parent, e) from None
    with target_lock(target):
        recover(target)  # a killed write's temporary file
        with _write_file(target) as tmp:
            yield tmp


@contextlib.contextmanager
def _write_file(target: Path) -> Iterator[Path]:
    tmp = None
    try:
        tmp = unused_name(target.parent, target.name, ".tmp")
        os.close(create_new(tmp))
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        tmp = None
        fsync_dir(target.parent)
    except Exception as e:
        error = as_os_error(e)
        if error is None:
            raise
        if error.filename and tmp is not None and Path(error.filename) == tmp:
            error = OSError(error.errno, error.strerror)  # the temporary name means nothing to the user
        raise output_error(target, error) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):  # named before it was created: a read-only file system refuses
                tmp.unlink(missing_ok=True)


def as_umask_allows(path: str | os.PathLike) -> None:
    """Give a file the permissions a plain ``open()`` would (0666 less the umask): temporary files
    are created private (0600), which the finished output need not be."""
    os.chmod(path, 0o666 & ~_umask())
