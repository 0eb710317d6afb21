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

from ..data.pairs import Pairs, PairsLike
from ..errors import ModelError
from ..io.manifest import read_json_object
from ..io.report import RunReport
from .pretrained import model_folder
from .pretrained_folder import build_pretrained, source_folder
from .siamese import FORMAT, SiameseModel


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


def sentence_encoder(name_or_folder: str | os.PathLike, *, max_length: int | None = None) -> tuple[SiameseModel, dict]:
    """The pretrained encoder with the cosine head (threshold not chosen), and what it was built
    from. ``max_length``: tokens kept per text (default: the folder's ``max_seq_length``, else 128)."""
    return build_pretrained(SiameseModel, name_or_folder, max_length=max_length)


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
    are encoded (auto: a GPU when there is one); ``progress``: their encoding's progress on stderr.
    The same as :meth:`SiameseModel.from_pretrained`."""
    return SiameseModel.from_pretrained(
        name_or_folder, val_pairs, max_length=max_length, metric=metric, device=device, progress=progress
    )


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
