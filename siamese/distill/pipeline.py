"""teacher by name or folder → static student → optional fine-tune → threshold: ``siamese distill``."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..config.static import DistillRun, StaticConfig
from ..data.pairs import Pairs
from ..errors import ConfigError, DataError
from ..io.report import RunReport
from ..models.siamese import SiameseModel
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
    from ..models.pretrained_folder import set_threshold, validation_parts
    from ..models.siamese import ModelConfig
    from ..training.bi_encoder import TrainConfig, train
    from ..training.teacher import load_teacher

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
            assert isinstance(tuned, SiameseModel)  # a student is a bi-encoder: train() returns one
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


def distill_run(run: DistillRun, config: StaticConfig | None = None, *, progress: bool = True) -> RunReport:
    """A distillation from files to a model folder, as ``siamese distill`` runs it: the corpus
    (``run.data``, default the shared sets), the validation and fine-tuning pair files read,
    :func:`distill`, the student saved to ``run.out``. Returns the report (result and lines) and
    the student (a :class:`~siamese.io.report.RunReport`)."""
    from ..data.datasets import validation_sets
    from ..data.pairs import read_pairs
    from ..decision.decide import threshold_line
    from ..io.atomic import check_not_input, check_target
    from .corpus import read_corpus

    if run.out is None:
        raise ConfigError("give --out DIR: the folder the student is saved to")
    check_not_input(run.out, [run.teacher, *(run.data or []), *(run.fine_tune or []), *(run.val_data or [])])
    check_target(run.out, overwrite=run.overwrite, kind="model")
    config = config or StaticConfig()
    config.check()
    if run.fine_tune is None and run.fine_tune_loss != DistillRun.fine_tune_loss:
        raise ConfigError("--fine-tune-loss goes with --fine-tune PAIRS (the pairs to fine-tune the student on)")
    if run.fine_tune is not None:  # the student is a cosine bag of words: refused now, not after the teacher's pass
        from ..models.losses import LOSSES, check_head_and_loss

        check_head_and_loss("cosine", run.fine_tune_loss, losses=LOSSES)
    texts = read_corpus(run.data, column=run.column) if run.data else None
    val = [read_pairs(p) for p in run.val_data] if run.val_data else validation_sets()
    tune = Pairs.concat([read_pairs(p) for p in run.fine_tune]) if run.fine_tune else None
    student = distill(
        run.teacher,
        texts,
        config=config,
        val_pairs=val,
        fine_tune=tune,
        fine_tune_loss=run.fine_tune_loss,
        fine_tune_epochs=run.fine_tune_epochs,
        fine_tune_lr=run.fine_tune_lr,
        progress=progress,
        device=run.device,
    )
    student.save(run.out, overwrite=run.overwrite)
    info = student.info["distillation"]
    choice = info["threshold_choice"]
    kept = next(h for h in info["history"] if h.get("kept"))
    result = {
        "out": str(run.out),
        "teacher": info["teacher"].get("source"),
        "corpus_texts": info["corpus_texts"],
        "corpus_distinct": info.get("corpus_distinct", info["corpus_texts"]),
        "tokens": info["tokens"],
        "dim": student.dim,
        "kept_epoch": kept["epoch"],
        "val_cosine": kept["val_cosine"],
        "best_val_cosine": max((h["val_cosine"] or 0) for h in info["history"]),
        "threshold": choice["threshold"],
        "seconds": info["seconds"],
        "fine_tuned": "fine_tune" in info,
    }
    learned = (
        f"learned on {_sampled(info)} in {info['seconds']:.0f} s (epoch {kept['epoch']} kept; held-out cosine "
        f"to the teacher {kept['val_cosine'] or 0:.3f})"
        if info["epochs"]
        else f"the teacher's token vectors alone (--epochs 0), in {info['seconds']:.0f} s"
    )
    lines = [
        f"student of {result['teacher']}: {info['tokens']:,} tokens x {student.dim}, {learned}",
        threshold_line(choice["threshold"], {}, choice["val_pairs"]),
        f"saved to {run.out}",
    ]
    return RunReport(result, lines, student)


def _sampled(info: dict) -> str:
    """``64,000 texts``, or ``64,000 of 128,274 texts (--corpus-sample)`` for a sample."""
    used, distinct = info["corpus_texts"], info.get("corpus_distinct", info["corpus_texts"])
    return f"{used:,} texts" if used == distinct else f"{used:,} of {distinct:,} texts (--corpus-sample)"
