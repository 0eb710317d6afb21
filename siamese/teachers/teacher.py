"""A teacher for distillation: any cosine model whose vectors a student should reproduce.

``load_teacher`` takes a Siamese model folder, a Hugging Face model folder (mean or [CLS]
pooling, as its sentence-transformers config says), a name from :data:`siamese.pretrained.NAMED` ("mpnet", "minilm"), or
a :class:`~siamese.model.SiameseModel` already in memory. :class:`TeacherVectors` holds its
vectors of the training texts, each distinct text encoded once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import ConfigError, ModelError
from ..manifest import read_json_object
from ..model import FORMAT, ModelConfig, SiameseModel
from ..pretrained import NAMED, model_folder


def load_teacher(teacher, *, max_length: int | None = 128) -> tuple[SiameseModel, dict]:
    """The teacher model and what to record about it (source, name, fingerprint, width)."""
    if isinstance(teacher, SiameseModel):
        model, info = teacher, {"source": str(teacher.path) if teacher.path else "a model in memory"}
    else:
        name = os.fspath(teacher)
        folder = model_folder(name)
        info = {"source": str(folder), **({"name": name} if name in NAMED else {})}
        model = _load_folder(folder, max_length)
    if model.config.head != "cosine":
        raise ConfigError(f"teacher {info['source']}: its head is {model.config.head!r}; a teacher must be a cosine "
                          "model (its cosines are the targets)")
    return model, {**info, "fingerprint": model.fingerprint(), "dim": model.dim}


def _load_folder(folder: Path, max_length: int | None) -> SiameseModel:
    if not folder.is_dir():
        raise ModelError(f"teacher {folder}: no such folder (give a Siamese model folder, a Hugging Face model folder, "
                         f"or one of: {', '.join(NAMED)})")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ModelError(f"teacher {folder}: no config.json (not a Siamese or Hugging Face model folder)")
    raw = read_json_object(config_file, ModelError)
    if raw.get("format") == FORMAT:
        return SiameseModel.load(folder)
    if "model_type" not in raw:
        raise ModelError(f"teacher {config_file}: neither a Siamese model (format {FORMAT}) nor a Hugging Face config (model_type)")
    options = {"path": str(folder), "pooling": sentence_transformers_pooling(folder)}
    try:
        return SiameseModel.build([], ModelConfig(encoder="transformer", max_length=max_length, encoder_options=options))
    except (OSError, ValueError, KeyError) as e:  # transformers' own errors on a broken folder
        raise ModelError(f"teacher {folder}: cannot load the model ({str(e).splitlines()[0]})") from None


def sentence_transformers_pooling(folder: Path) -> str:
    """The pooling a sentence-transformers folder declares (``modules.json``; mean without one).
    Modules we would not reproduce (a Dense projection, max pooling, ...) are refused."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return "mean"
    modules = read_json_object(modules_file, ModelError, "a JSON list of modules", kind=list)
    if not all(isinstance(m, dict) for m in modules):
        raise ModelError(f"{modules_file}: expected a JSON list of modules")
    pooling = "mean"
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind == "Pooling":
            settings = read_json_object(folder / module.get("path", "") / "config.json", ModelError)
            modes = {k.removeprefix("pooling_mode_") for k, v in settings.items() if k.startswith("pooling_mode_") and v}
            if modes == {"mean_tokens"}:
                pooling = "mean"
            elif modes == {"cls_token"}:
                pooling = "cls"
            else:
                raise ModelError(f"teacher {folder}: pooling {', '.join(sorted(modes)) or 'none'} is not supported (mean or cls)")
        elif kind not in ("Transformer", "Normalize"):
            raise ModelError(f"teacher {folder}: sentence-transformers module {kind!r} is not supported "
                             "(Transformer, Pooling and Normalize are)")
    return pooling


@dataclass
class TeacherVectors:
    """The teacher's unit vectors of a set of texts: ``vectors[index[text]]``."""

    vectors: torch.Tensor  # (distinct texts, teacher width), float32
    index: dict[str, int]
    seconds: float = 0.0

    @classmethod
    def encode(cls, teacher: SiameseModel, texts: Sequence[str], *, progress: bool = False) -> TeacherVectors:
        """Encode each distinct text of ``texts`` once (length-sorted batches)."""
        distinct = list(dict.fromkeys(texts))
        if progress:
            tqdm.write(f"teacher: encoding {len(distinct):,} distinct texts")
        started = time.perf_counter()
        vectors = np.asarray(teacher.encode(distinct, progress=progress), dtype=np.float32)
        return cls(torch.from_numpy(vectors), {t: i for i, t in enumerate(distinct)}, time.perf_counter() - started)

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        """The row of each text (texts must have been encoded)."""
        return np.fromiter((self.index[t] for t in texts), dtype=np.int64, count=len(texts))
