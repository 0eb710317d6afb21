"""Open a model folder of either kind — a Siamese bi-encoder or a cross-encoder — for the commands
that only score pairs (evaluate, predict, calibrate, score, serve's /similarity)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError, ModelError
from .manifest import read_json_object

CROSS_FORMAT = "siamese-cross/1"


def folder_format(path: str | os.PathLike) -> str | None:
    """The ``format`` of a model folder's config.json (None when it has none)."""
    file = Path(path) / "config.json"
    if not file.is_file():
        return None
    return read_json_object(file, ModelError).get("format")


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
    require_model_folder(path)  # a wrong path answers at once, without importing torch
    if folder_format(path) == CROSS_FORMAT:
        from .cross import CrossEncoder

        if device not in (None, "auto", "cpu"):
            raise ConfigError(f"{path}: cross-encoders run on the CPU here (--device {device} is for bi-encoders)")
        return CrossEncoder.load(path, precision=precision)
    from .model import SiameseModel

    return SiameseModel.load(path, precision=precision, device=device or "auto")


def refuse_cross(path: str | os.PathLike) -> None:
    """One line for a command that needs vectors when it is given a cross-encoder."""
    if folder_format(path) == CROSS_FORMAT:
        raise ModelError(
            f"{path}: a cross-encoder scores pairs and has no vectors; use it with evaluate, predict, score, "
            "calibrate or serve (or to verify a bi-encoder's candidates: dedupe --verify, search --rerank)"
        )
