"""Open a model folder of either kind — a Siamese bi-encoder or a cross-encoder — for the commands
that only score pairs (evaluate, predict, calibrate, score, serve's /similarity)."""

from __future__ import annotations

import os

from .pretrained import CROSS_FORMAT, folder_format, refuse_cross, require_model_folder  # noqa: F401 (re-exported)


def load_model(path: str | os.PathLike, *, precision: str | None = None, device: str | None = None):
    """A :class:`siamese.SiameseModel` or a :class:`siamese.cross.CrossEncoder`, by the folder's format."""
    from ..io.atomic import clear_leftovers

    clear_leftovers(path)  # what a killed save of this folder left beside it
    require_model_folder(path)  # a wrong path answers at once, without importing torch
    if folder_format(path) == CROSS_FORMAT:
        from ..cross import CrossEncoder

        return CrossEncoder.load(path, precision=precision, device=device or "auto")
    from .siamese import SiameseModel

    return SiameseModel.load(path, precision=precision, device=device or "auto")


def load_cross_encoder(path: str | os.PathLike, *, device: str | None = None):
    """A cross-encoder folder, or one line saying what the folder holds instead (to rerank or verify with)."""
    from ..errors import ConfigError

    model = load_model(path, device=device)
    if getattr(model, "kind", None) != "cross":
        raise ConfigError(f"{path}: --rerank takes a cross-encoder (siamese train --cross), not a bi-encoder")
    return model


def load_verifier(path: str | os.PathLike, *, device: str | None = None):
    """A model to verify a dedupe's candidate pairs with (``dedupe --verify``): a cross-encoder or a
    cosine bi-encoder folder, or one line saying why not."""
    from ..errors import ConfigError

    model = load_model(path, device=device)
    if getattr(model, "kind", None) != "cross" and model.config.head != "cosine":
        raise ConfigError(
            f"{path}: --verify takes a cosine bi-encoder or a cross-encoder; this model's head is {model.config.head!r}"
        )
    return model
