"""The text side of the text→emoji model: which encoder turns a tweet into a vector.

``bilstm`` is a BiLSTM trained from GloVe with the rest of the model. Every other
choice is a sentence encoder of the zoo whose vectors a small projection maps into the emoji
space: ``minilm`` and ``mpnet`` (by name), ``student:FOLDER`` (a static student from
``siamese distill``, or any Siamese model folder) or a sentence-transformers / Hugging Face
FOLDER. A frozen named encoder is saved as its name and reloaded from its package; any other
(or a fine-tuned one) is saved whole into the model folder's ``text_encoder/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError, ModelError
from ..models.pretrained import NAMED, SHORT_NAMES
from ..models.siamese import FORMAT as SIAMESE_FORMAT
from ..models.siamese import SiameseModel

BILSTM = "bilstm"
SUBFOLDER = "text_encoder"  # in a model folder: the saved encoder, when it is not referenced by name
STUDENT = "student:"


def describe(spec: str) -> str:
    """What ``--text-encoder`` accepts (for error messages and help)."""
    return f"{BILSTM}, {', '.join(SHORT_NAMES)}, {STUDENT}FOLDER or a model FOLDER (got {spec!r})"


def load_text_encoder(spec: str) -> SiameseModel:
    """The sentence encoder named by ``spec`` (anything but ``bilstm``), ready to encode."""
    from ..models.sentence_encoder import sentence_encoder

    if spec == BILSTM:
        raise ConfigError("the bilstm text side is part of the emoji model, not a sentence encoder")
    if spec in NAMED and not Path(spec).exists():
        return sentence_encoder(spec)[0]
    folder = Path(spec[len(STUDENT) :] if spec.startswith(STUDENT) else spec)
    if not folder.is_dir():
        raise ConfigError(f"--text-encoder: no such folder {folder}; expected {describe(spec)}")
    if _is_siamese_folder(folder):
        return SiameseModel.load(folder)
    if spec.startswith(STUDENT):
        raise ModelError(f"{folder}: not a Siamese model folder (a student comes from siamese distill)")
    return sentence_encoder(folder)[0]


def _is_siamese_folder(folder: Path) -> bool:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8")).get("format") == SIAMESE_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def saved_reference(spec: str, *, fine_tuned: bool) -> str:
    """What the model folder's config records: the name of a frozen named encoder, else the
    subfolder the encoder is saved into."""
    return spec if spec in NAMED and not fine_tuned and not Path(spec).exists() else SUBFOLDER


def load_saved(model_dir: str | os.PathLike, reference: str) -> SiameseModel:
    """The encoder a saved emoji model refers to (see :func:`saved_reference`)."""
    if reference == SUBFOLDER:
        folder = Path(model_dir) / SUBFOLDER
        if not folder.is_dir():
            raise ModelError(f"{model_dir}: model folder is missing {SUBFOLDER}/")
        return SiameseModel.load(folder)
    if reference not in NAMED:
        raise ModelError(f"{Path(model_dir) / 'config.json'}: unknown text_encoder {reference!r}")
    return load_text_encoder(reference)
