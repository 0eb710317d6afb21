"""teacher by name or folder → static student → optional fine-tune → threshold: ``siamese distill``."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..data import Pairs
from ..errors import DataError
from ..model import SiameseModel
from .config import StaticConfig
from .corpus import default_corpus
from .heartbeat import heartbeat
from .static import distill_static


def distill(
    teacher: str | os.PathLike | SiameseModel = "minilm",
    texts: Sequence[str] | None = None,
    *,
    config: StaticConfig | None = None,
    val_pairs: Pairs | Sequence[Pairs] | None = None,
    fine_tune: Pairs | None = None,
    fine_tune_loss: str = "mnr",
    fine_tune_epochs: int = 1,
    fine_tune_lr: float = 1e-3,
    progress: bool = True,
    device: str = "auto",
) -> SiameseModel:
    """A static student of ``teacher`` (``minilm``, ``mpnet``, a Siamese, sentence-transformers or
    Hugging Face folder, or a model in memory) learned on ``texts`` (default:
    :func:`default_corpus`), optionally fine-tuned on labelled pairs, with its decision threshold
    chosen on ``val_pairs`` (one set or several, both labels). ``device``: where the teacher and
    the student run (auto: a GPU when there is one)."""
    from ..model import ModelConfig
    from ..sentence_encoder import set_threshold, validation_parts
    from ..teachers import load_teacher
    from ..training import TrainConfig, train

    config = config or StaticConfig()
    config.check()
    parts = validation_parts(val_pairs)
    val = Pairs.concat(parts) if parts else None
    corpus = default_corpus() if texts is None else list(texts)
    distinct = len(set(t for t in corpus if t.strip()))
    if distinct < 10:  # before the teacher is loaded: a mistake should not cost its start-up
        raise DataError(f"the distillation corpus has {distinct} distinct texts; at least 10 are needed")
    beat = heartbeat(progress)  # a line every 30 s where no bar is drawn
    with beat.running():
        beat.stage("loading the teacher")
        teacher_model, info = load_teacher(teacher, max_length=config.max_length, device=device)
        student = distill_static(teacher_model, corpus, config, teacher_info=info, progress=progress, beat=beat)
        del teacher_model  # hundreds of MB for a large teacher
        if fine_tune is not None:
            beat.stage("fine-tuning on labelled pairs")
            tuned = train(
                fine_tune,
                val,
                model_config=ModelConfig(loss=fine_tune_loss),
                config=TrainConfig(epochs=fine_tune_epochs, lr=fine_tune_lr, seed=config.seed, device=device),
                initial=student,
                progress=progress,
            )
            tuned.info["distillation"] = student.info["distillation"]
            student = tuned
        beat.stage("choosing the threshold on validation pairs")
        student.info["distillation"]["threshold_choice"] = set_threshold(student, parts)
        if fine_tune is not None:
            student.info["distillation"]["fine_tune"] = {
                "source": fine_tune.source,
                "pairs": len(fine_tune),
                "loss": fine_tune_loss,
                "epochs": fine_tune_epochs,
                "lr": fine_tune_lr,
            }
        return student
