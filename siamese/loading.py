"""Open a model folder of either kind — a Siamese bi-encoder or a cross-encoder — for the commands
that only score pairs (evaluate, predict, calibrate, score, serve's /similarity)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ModelError
from .manifest import read_json_object

CROSS_FORMAT = "siamese-cross/1"


def folder_format(path: str | os.PathLike) -> str | None:
    """The ``format`` of a model folder's config.json (None when it has none)."""
    file = Path(path) / "config.json"
    if not file.is_file():
        return None
    return read_json_object(file, ModelError).get("format")


def load_model(path: str | os.PathLike, *, precision: str | None = None, device: str | None = None):
    """A :class:`siamese.SiameseModel` or a :class:`siamese.cross.CrossEncoder`, by the folder's format."""
    from .atomic import clear_leftovers

    clear_leftovers(path)  # what a killed save of this folder left beside it
    if folder_format(path) == CROSS_FORMAT:
        from .cross import CrossEncoder

        return CrossEncoder.load(path, precision=precision, device=device or "auto")
    from .model import SiameseModel

    return SiameseModel.load(path, precision=precision, device=device or "auto")


def refuse_cross(path: str | os.PathLike) -> None:
    """One line for a command that needs vectors when it is given a cross-encoder."""
    if folder_format(path) == CROSS_FORMAT:
        raise ModelError(
            f"{path}: a cross-encoder scores pairs and has no vectors; use it with evaluate, predict, score, "
            "calibrate or serve (or to verify a bi-encoder's candidates: dedupe --verify, search --rerank)"
        )
