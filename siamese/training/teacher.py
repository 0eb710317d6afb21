"""A teacher for distillation: any cosine model whose vectors a student should reproduce.

``load_teacher`` takes a Siamese model folder, a sentence-transformers or Hugging Face model
folder (mean or [CLS] pooling, as its sentence-transformers config says; see
:func:`siamese.models.sentence_encoder.sentence_encoder`), a name from
:data:`siamese.models.pretrained.NAMED` ("mpnet", "minilm"), or a
:class:`~siamese.models.siamese.SiameseModel` already in memory. :class:`TeacherVectors` holds its
vectors of the training texts, each distinct text encoded once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError, ModelError
from ..io.progress import tqdm
from ..models.pretrained import NAMED, model_folder
from ..models.sentence_encoder import load_bi_encoder
from ..models.siamese import SiameseModel


def load_teacher(
    teacher, *, max_length: int | None = 128, device: str | torch.device = "auto"
) -> tuple[SiameseModel, dict]:
    """The teacher model and what to record about it (source, name, fingerprint, width). A teacher
    read from a folder runs on ``device``; one given in memory stays where it is."""
    if isinstance(teacher, SiameseModel):
        model, info = teacher, {"source": str(teacher.path) if teacher.path else "a model in memory"}
    else:
        name = os.fspath(teacher)
        folder = model_folder(name)
        info = {"source": str(folder), **({"name": name} if name in NAMED else {})}
        try:
            model = load_bi_encoder(folder, max_length=max_length, device="cpu").to(device)
        except ModelError as e:
            raise ModelError(f"teacher {e}") from None
    if model.config.head != "cosine":
        raise ConfigError(
            f"teacher {info['source']}: its head is {model.config.head!r}; a teacher must be a cosine "
            "model (its cosines are the targets)"
        )
    return model, {**info, "fingerprint": model.fingerprint(), "dim": model.dim}


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
