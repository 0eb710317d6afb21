"""A Siamese model from a pretrained sentence encoder used as it is (no training).

:func:`from_pretrained` takes ``minilm``, ``mpnet`` or a local sentence-transformers or Hugging
Face model folder, builds the transformer encoder with the folder's pooling (mean or [CLS]) and
the cosine head, and chooses the decision threshold on validation pairs. The result saves as any
Siamese model folder (and, like every transformer model, as a sentence-transformers folder).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..data.pairs import Pairs, PairsLike, as_pairs
from ..decision.decide import both_labels, decide
from ..errors import ConfigError, ModelError
from ..io.manifest import read_json_object
from ..io.report import RunReport
from .pretrained import NAMED, SHORT_NAMES, model_folder, require_safetensors
from .siamese import FORMAT, ModelConfig, SiameseModel
from .st_layout import Layout, read_layout

DEFAULT_MAX_LENGTH = ModelConfig.max_length  # when the folder declares no max_seq_length


def load_bi_encoder(
    source: str | os.PathLike | SiameseModel, *, max_length: int | None = None, device: str = "cpu"
) -> SiameseModel:
    """A bi-encoder from whatever names one: a :class:`SiameseModel` in memory (as it is), a Siamese
    model folder, a sentence-transformers or Hugging Face folder, or a name of :data:`NAMED`
    (``minilm``, ``mpnet``). The one place a "name or folder" becomes a model, for the teacher of
    a distillation, the model ``siamese.dedupe`` takes and the start of a fine-tuning; a folder
    read here runs on ``device``. ``max_length`` applies to a pretrained encoder read here."""
    if isinstance(source, SiameseModel):
        return source
    folder = model_folder(source)
    config_file = folder / "config.json"
    if config_file.is_file() and read_json_object(config_file, ModelError).get("format") == FORMAT:
        return SiameseModel.load(folder, device=device)
    return sentence_encoder(folder, max_length=max_length)[0].to(device)


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
    if config_file.is_file() and read_json_object(config_file, ModelError).get("format") == FORMAT:
        raise ModelError(f"{folder}: already a Siamese model folder (load it with SiameseModel.load)")
    layout = read_layout(folder)
    hf_config = layout.transformer / "config.json"
    if not hf_config.is_file():
        raise ModelError(
            f"{folder}: not a sentence-transformers or Hugging Face model folder (no {hf_config.relative_to(folder)})"
        )
    if "model_type" not in read_json_object(hf_config, ModelError):
        raise ModelError(
            f"{hf_config}: neither a Siamese model (format {FORMAT}) nor a Hugging Face config (model_type)"
        )
    require_safetensors(layout.transformer)
    return folder, layout


def sentence_encoder(name_or_folder: str | os.PathLike, *, max_length: int | None = None) -> tuple[SiameseModel, dict]:
    """The pretrained encoder with the cosine head (threshold not chosen), and what it was built
    from. ``max_length``: tokens kept per text (default: the folder's ``max_seq_length``, else 128)."""
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
        model = SiameseModel.build([], config)
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


def from_pretrained(
    name_or_folder: str | os.PathLike,
    val_pairs: PairsLike | Sequence[Pairs] | None = None,
    *,
    max_length: int | None = None,
    metric: str = "accuracy",
    device: str = "auto",
    progress: bool = False,
) -> SiameseModel:
    """A cosine Siamese model on a pretrained encoder, untrained, with its threshold chosen on
    ``val_pairs`` (one set or several; both labels needed) to maximise ``metric``. Without
    validation pairs the threshold stays at the default. ``info["pretrained"]`` records what it
    was built from and what the threshold was chosen on. ``device``: where the validation pairs
    are encoded (auto: a GPU when there is one); ``progress``: their encoding's progress on stderr."""
    parts = validation_parts(val_pairs)
    model, info = sentence_encoder(name_or_folder, max_length=max_length)
    model.to(device)
    model.info["pretrained"] = {**info, "threshold_choice": set_threshold(model, parts, metric, progress=progress)}
    return model


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


def set_threshold(model: SiameseModel, parts: Sequence[Pairs], metric: str = "accuracy", *, progress=False) -> dict:
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


def pretrained_run(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    val_data: Sequence[str | os.PathLike] | None = None,
    max_length: int | None = None,
    metric: str = "accuracy",
    format: str = "auto",
    text1: str | None = None,
    text2: str | None = None,
    label: str | None = None,
    device: str = "auto",
    overwrite: bool = False,
) -> RunReport:
    """A pretrained encoder saved as a model folder, as ``siamese pretrained`` does:
    :func:`from_pretrained` with its threshold chosen on the pair files ``val_data`` (default: the
    shared validation sets), saved to ``out``; the report's ``value`` is the model."""
    from ..data.datasets import validation_sets
    from ..data.pairs import read_pairs
    from ..io.atomic import check_not_input, check_target

    check_not_input(out, [source])
    check_target(Path(out), overwrite=overwrite, kind="model")
    source_folder(source)  # a bad source (pickled weights, say) is refused before any pairs are read
    how = {"text1": text1, "text2": text2, "label": label}
    parts = [read_pairs(p, format, **how) for p in val_data] if val_data else validation_sets()
    model = from_pretrained(source, parts, max_length=max_length, metric=metric, device=device, progress=True)
    model.save(out, overwrite=overwrite)
    info = model.info["pretrained"]
    choice = info["threshold_choice"]
    result = {
        "out": str(out),
        "source": str(source),
        "folder": info["folder"],
        "pooling": info["pooling"],
        "max_length": info["max_length"],
        "dim": info["dim"],
        "threshold": choice["threshold"],
        "threshold_metric": choice["metric"],
        "threshold_value": choice["value"],
        "val_pairs": choice["val_pairs"],
        "chosen_on": choice["chosen_on"],
    }
    lines = [
        f"{source}: {info['pooling']} pooling, {info['dim']}-d, up to {info['max_length']} tokens per text",
        f"threshold {choice['threshold']:.3f} ({choice['metric']} {choice['value']:.4f} on {choice['val_pairs']} "
        f"validation pairs: {', '.join(choice['chosen_on'])})",
        f"saved to {out}",
    ]
    return RunReport(result, lines, model)
