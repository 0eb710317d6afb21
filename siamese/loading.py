"""Open a model folder of either kind — a Siamese bi-encoder or a cross-encoder — for the commands
that only score pairs (evaluate, predict, calibrate, score, serve's /similarity)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ModelError
from .manifest import CROSS_FORMAT, folder_format, refuse_cross  # noqa: F401 (re-exported)


def require_model_folder(path: str | os.PathLike) -> None:
    """Refuse, before any heavy import, a path with no config.json; a pretrained model's name
    (``minilm``) is pointed to :func:`siamese.from_pretrained`, which builds it."""
    if (Path(path) / "config.json").is_file():
        return
    from .pretrained import NAMED

    name = os.fspath(path)
    if name in NAMED:
        raise ModelError(
            f"{name}: not a model folder but a pretrained model's name; build it with "
            f"siamese.from_pretrained({name!r}) (CLI: siamese pretrained {name} --out FOLDER), then load FOLDER"
        )
    raise ModelError(f"{path}: not a siamese model folder (no config.json)")


def load_model(path: str | os.PathLike, *, precision: str | None = None, device: str | None = None):
    """A :class:`siamese.SiameseModel` or a :class:`siamese.cross.CrossEncoder`, by the folder's format."""
    from .atomic import clear_leftovers

    clear_leftovers(path)  # what a killed save of this folder left beside it
    require_model_folder(path)  # a wrong path answers at once, without importing torch
    if folder_format(path) == CROSS_FORMAT:
        from .cross import CrossEncoder

        return CrossEncoder.load(path, precision=precision, device=device or "auto")
    from .model import SiameseModel

    return SiameseModel.load(path, precision=precision, device=device or "auto")
