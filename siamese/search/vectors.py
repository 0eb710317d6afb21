"""Texts -> a float32 ``.npy`` of their vectors, written atomically (``siamese encode``).

Row i is the i-th text. For a cosine model the rows are unit vectors; for the other heads
(manhattan, classifier heads) they are the encoder's raw features, the vectors the head compares.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import DataError, OutputError
from ..io.atomic import as_umask_allows, atomic_file, check_file_target


def check_vectors_file(path: str | os.PathLike) -> Path:
    """Refuse, before any work, an output path that is a folder or lies under a file or a
    folder we cannot write to."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a folder; give a file name for the vectors (e.g. {path / 'vectors.npy'})")
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise DataError(f"{path}: cannot write there ({parent} is a file, not a folder)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"{path}: cannot write there (no permission in {parent})")
    return path


def check_npy_name(path: Path) -> Path:
    """Vectors are written as NumPy's ``.npy``: a file named otherwise (``v.txt``, ``v.csv``) would hold
    what its name says it does not."""
    if path.suffix.lower() != ".npy":
        raise DataError(f"{path}: vectors are written as NumPy .npy; name the file {path.stem}.npy")
    return path


def write_vectors(path: str | os.PathLike, vectors: np.ndarray, *, overwrite: bool = False) -> Path:
    """Save ``vectors`` as float32 ``.npy`` at exactly ``path`` (a temporary file renamed into place); a file
    already there is replaced only with ``overwrite``."""
    path = check_npy_name(check_file_target(check_vectors_file(path), overwrite=overwrite))
    try:
        with atomic_file(path) as tmp:
            with open(tmp, "wb") as f:  # a file object: np.save(name) would add ".npy"
                np.save(f, np.asarray(vectors, dtype=np.float32))
            as_umask_allows(tmp)  # the temporary file is private (0600); the vectors are a plain output
    except OutputError:
        raise  # atomic_file's, naming the file already
    except OSError as e:
        raise DataError(f"{path}: cannot write ({e.strerror or e})") from None
    return path


def encode_to_file(
    model,
    texts: Sequence[str],
    out: str | os.PathLike,
    *,
    batch_size: int | None = None,
    progress: bool = False,
    engine=None,
    overwrite: bool = False,
) -> dict:
    """Encode ``texts`` with ``model`` into ``out``; returns ``n``, ``dim``, ``seconds`` (encoding
    only), ``texts_per_second`` and ``out``. ``engine`` (e.g. :class:`siamese.search.ray_engine.RayEngine`):
    the encoding runs there and its vectors stream into the file (a memory map), so they never
    sit in memory all at once. A file already at ``out`` is replaced only with ``overwrite``."""
    out = check_npy_name(check_file_target(check_vectors_file(out), overwrite=overwrite))  # before the encoding
    started = time.perf_counter()
    if engine is not None:
        texts = list(texts)
        try:
            with atomic_file(out) as tmp:
                vectors = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), model.dim))
                engine.encode(model, texts, out=vectors)
                vectors.flush()
                as_umask_allows(tmp)
        except OutputError:
            raise
        except OSError as e:
            raise DataError(f"{out}: cannot write ({e.strerror or e})") from None
        seconds = time.perf_counter() - started
    else:
        vectors = model.encode(list(texts), batch_size=batch_size, progress=progress)
        seconds = time.perf_counter() - started
        write_vectors(out, vectors, overwrite=True)  # checked above
    return {
        "n": int(vectors.shape[0]),
        "dim": int(vectors.shape[1]),
        "seconds": round(seconds, 3),
        "texts_per_second": round(vectors.shape[0] / seconds, 1) if seconds > 0 else None,
        "out": str(out),
    }
