"""Open a model folder of either kind — a Siamese bi-encoder or a cross-encoder — for the commands
that only score pairs (evaluate, predict, calibrate, score, serve's /similarity)."""

from __future__ import annotations

import os

from .errors import ConfigError
from .manifest import CROSS_FORMAT, folder_format, refuse_cross  # noqa: F401 (re-exported)


def load_model(path: str | os.PathLike, *, precision: str | None = None, device: str | None = None):
    """A :class:`siamese.SiameseModel` or a :class:`siamese.cross.CrossEncoder`, by the folder's format."""
    if folder_format(path) == CROSS_FORMAT:
        from .cross import CrossEncoder

        if device not in (None, "auto", "cpu"):
            raise ConfigError(f"{path}: cross-encoders run on the CPU here (--device {device} is for bi-encoders)")
        return CrossEncoder.load(path, precision=precision)
    from .model import SiameseModel

    return SiameseModel.load(path, precision=precision, device=device or "auto")
