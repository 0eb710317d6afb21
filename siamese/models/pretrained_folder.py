"""A pretrained sentence encoder's folder as the parts of a Siamese model: the folder checked
(:func:`source_folder`), the model built with the folder's pooling and the cosine head
(:func:`build_pretrained`, for any model class: :meth:`SiameseModel.from_pretrained` passes its own),
and the threshold chosen on validation pairs (:func:`set_threshold`).

Below :mod:`siamese.models.siamese`, which builds on it: nothing here imports the model class."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.configs import MODEL_FORMAT, ModelConfig
from ..data.pairs import Pairs, PairsLike, as_pairs
from ..decision.decide import both_labels, decide
from ..errors import ConfigError, ModelError
from ..io.manifest import read_json_object
from .pretrained import NAMED, SHORT_NAMES, model_folder, require_safetensors
from .st_layout import Layout, read_layout

DEFAULT_MAX_LENGTH = ModelConfig.max_length  # when the folder declares no max_seq_length


def source_folder(name_or_folder: str | os.PathLike) -> tuple[Path, Layout]:
    """The model folder a name or path gives and its layout, checked without loading anything:
    a missing folder, a Siamese model folder, one without a Hugging Face config, or one whose
    weights are only pickles is refused here, before any data is read for it."""
    folder = model_folder(name_or_folder)
    if not folder.is_dir():
        raise ModelError(
            f"{folder}: no such folder (give a sentence-transformers or Hugging Face model folder, "
            f"or one of: {', '.join(SHORT_NAMES)})"
        )
    config_file = folder / "config.json"
    if config_file.is_file() and read_json_object(config_file, ModelError).get("format") == MODEL_FORMAT:
        raise ModelError(f"{folder}: already a Siamese model folder (load it with SiameseModel.load)")
    layout = read_layout(folder)
    hf_config = layout.transformer / "config.json"
    if not hf_config.is_file():
        raise ModelError(
            f"{folder}: not a sentence-transformers or Hugging Face model folder (no {hf_config.relative_to(folder)})"
        )
    if "model_type" not in read_json_object(hf_config, ModelError):
        raise ModelError(
            f"{hf_config}: neither a Siamese model (format {MODEL_FORMAT}) nor a Hugging Face config (model_type)"
        )
    require_safetensors(layout.transformer)
    return folder, layout


def build_pretrained(cls: Any, name_or_folder: str | os.PathLike, *, max_length: int | None = None) -> tuple[Any, dict]:
    """The pretrained encoder as a ``cls`` (a :class:`~siamese.models.siamese.SiameseModel`) with the cosine head
    (threshold not chosen), and what it was built from. ``max_length``: tokens kept per text (default: the
    folder's ``max_seq_length``, else 128)."""
    name = os.fspath(name_or_folder)
    folder, layout = source_folder(name)
    length = max_length or layout.max_seq_length or DEFAULT_MAX_LENGTH
    config = ModelConfig(
        encoder="transformer",
        head="cosine",
        max_length=length,
        encoder_options={"path": str(layout.transformer), "pooling": layout.pooling},
    )
    try:
        model = cls.build([], config)
    except (OSError, ValueError, KeyError) as e:  # transformers' own errors on a broken folder
        raise ModelError(f"{folder}: cannot load the model ({str(e).splitlines()[0]})") from None
    source = {
        "source": name,
        **({"name": name} if name in NAMED and folder != Path(name) else {}),
        "folder": str(folder.resolve()),
        "modules": list(layout.modules) or None,
        "pooling": layout.pooling,
        "max_length": length,
        "dim": model.dim,
    }
    return model, source


def validation_parts(val_pairs: PairsLike | Sequence[Pairs] | None) -> list[Pairs]:
    """Validation pairs as a list of sets (a set is anything :func:`~siamese.data.pairs.as_pairs` takes),
    refused (before any model is built) unless together they hold both labels."""
    if val_pairs is None:
        parts: list[Pairs] = []
    elif isinstance(val_pairs, (list, tuple)) and all(isinstance(p, Pairs) for p in val_pairs):
        parts = list(val_pairs)  # several sets (none: no validation)
    else:
        parts = [as_pairs(val_pairs, "val_pairs")]  # one set, in any form as_pairs takes
    val = Pairs.concat(parts) if parts else None
    if val is not None and not both_labels(val):
        raise ConfigError(
            f"validation pairs {val.source or ''}: need both duplicates and non-duplicates to choose a threshold"
        )
    return parts


def set_threshold(model: Any, parts: Sequence[Pairs], metric: str = "accuracy", *, progress=False) -> dict:
    """Choose ``model``'s threshold on the validation sets ``parts`` (kept when there are none);
    returns what was chosen, on what, and the metric's value there."""
    if not parts:
        return {"threshold": model.threshold, "chosen_on": None, "val_pairs": 0}
    val = Pairs.concat(list(parts))

    def similarity(a, b):  # both sides in one encoding, so one progress bar
        vectors = model.encode([*a, *b], progress=progress)
        return model.similarity_pairwise(vectors[: len(a)], vectors[len(a) :])

    # the sets the caller chose, however small: an untrained encoder has no training pairs to fall back on
    decision = decide(similarity, val, default=model.threshold, metric=metric, calibrate=False, minimum=(2, 1))
    model.set_threshold(decision.threshold)
    found = {k: v for k, v in decision.choice.items() if k not in ("split", "pairs")}
    return {"threshold": model.threshold, "chosen_on": [p.source for p in parts], "val_pairs": len(val), **found}
