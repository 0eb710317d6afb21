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


def load_verifier(source: str | os.PathLike, *, device: str | None = None):
    """A model to verify another's pairs with (``--verify`` of dedupe, predict, score and serve): a
    cross-encoder folder, or a cosine bi-encoder: a Siamese folder, a sentence-transformers or
    Hugging Face folder, or a pretrained name (``minilm``, ``mpnet``; its threshold the default,
    not chosen: ``siamese pretrained NAME --val-data ... --out FOLDER`` chooses one); or one line
    saying why not (a wrong path answers before torch is imported)."""
    from ..errors import ConfigError, ModelError
    from .pretrained import NAMED, SHORT_NAMES

    name = os.fspath(source)
    if folder_format(source) is not None:  # a folder of ours: a Siamese model or a cross-encoder
        model = load_model(source, device=device)
    else:
        if name not in NAMED and not os.path.isdir(name):  # at once, before torch is imported
            what = "not a folder" if os.path.exists(name) else "no such folder"
            raise ModelError(f"{source}: {what}; --verify takes a model folder or one of: {', '.join(SHORT_NAMES)}")
        from .sentence_encoder import from_pretrained

        model = from_pretrained(name, device=device or "auto")  # info["pretrained"] says what it is
    if getattr(model, "kind", None) != "cross" and model.config.head != "cosine":
        raise ConfigError(
            f"{source}: --verify takes a cosine bi-encoder or a cross-encoder; this model's head is "
            f"{model.config.head!r}"
        )
    return model
