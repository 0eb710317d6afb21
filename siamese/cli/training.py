"""``siamese train``, ``distill``, ``export`` and ``pretrained``: commands that write a model folder.
Also the ``train --nproc N`` launcher (local torch.distributed workers) and ``train --resume``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..distill.config import StaticConfig
from ..errors import ConfigError, SiameseError
from .common import (
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    LabelOpt,
    OverwriteOpt,
    TargetPrecisionOpt,
    TargetRecallOpt,
    Text1Opt,
    Text2Opt,
    _check_out,
    _emit,
    _read,
    user_errors,
)


def _threshold_source(val_pairs: int) -> str:
    return (
        f"chosen on {val_pairs} validation pairs"
        if val_pairs
        else "no validation pairs: the head's default, not chosen on data"
    )


def _answer_triplets(data: list[Path], val_data: Path | None, val_fraction: float, negatives: int, seed: int):
    """Training and validation triplets from answer-selection sets, and the validation questions."""
    import numpy as np

    from ..answers import make_triplets, read_answers

    questions = [q for path in data for q in read_answers(path)]
    if val_data is not None:
        val_questions = read_answers(val_data)
    else:
        order = np.random.default_rng(seed).permutation(len(questions))
        cut = max(1, round(val_fraction * len(questions)))
        val_questions = [questions[i] for i in order[:cut]]
        questions = [questions[i] for i in order[cut:]]
    source = "+".join(str(p) for p in data)
    return (
        make_triplets(questions, negatives=negatives, seed=seed, source=source),
        make_triplets(val_questions, negatives=negatives, seed=seed, source=str(val_data or source)),
        val_questions,
    )


def _train_cross(
    pairs,
    val,
    test,
    *,
    out: Path,
    transformer,
    prior,
    epochs,
    batch_size,
    lr,
    seed,
    precision,
    device,
    threshold_metric,
    calibrate,
    checkpoint,
    resume,
    run,
    overwrite,
    quiet,
    as_json,
) -> None:
    """``siamese train --cross``: a cross-encoder from --transformer (default minilm)."""
    from ..cross import CrossConfig, CrossTrainConfig, train_cross

    defaults = CrossTrainConfig()
    config = CrossTrainConfig(
        epochs=epochs or defaults.epochs,
        batch_size=batch_size or defaults.batch_size,
        lr=lr or defaults.lr,
        seed=seed,
        precision=precision,
        device=device,
        threshold_metric=threshold_metric,
        calibrate=calibrate,
    )
    model = train_cross(
        pairs,
        val,
        model_config=CrossConfig(transformer=transformer or "minilm", prior=prior),
        config=config,
        checkpoint=checkpoint,
        resume=resume,
        run=run,
        progress=not quiet,
    )
    model.save(out, overwrite=overwrite)
    info = model.info["training"]
    result = {
        "out": str(out),
        "kind": "cross",
        "train_pairs": info["train_pairs"],
        "val_pairs": info["val_pairs"],
        "epochs": len(info["history"]),
        "best_epoch": info["best_epoch"],
        "loss": info["history"][-1]["loss"],
        "val_loss": info["history"][-1].get("val_loss"),
        "threshold": model.threshold,
        "pairs_per_second": info["pairs_per_second"],
        "warmup_seconds": info["warmup_seconds"],
        "seconds": info["seconds"],
        "calibration": info["calibration"],
    }
    lines = [
        f"cross-encoder trained on {result['train_pairs']} pairs for {result['epochs']} epochs in {result['seconds']:.1f}s",
        f"threshold {model.threshold:.4f} ({_threshold_source(result['val_pairs'])})",
        f"saved to {out}",
    ]
    if test is not None:
        from ..evaluation import evaluate as run_evaluation

        result["test"] = t = run_evaluation(model, test)
        lines.append(f"held-out test split ({t['n']} pairs): accuracy {t['accuracy']:.4f}, ROC-AUC {t['roc_auc']:.4f}")
    _emit(result, as_json, lines)


def _saved_train_options(checkpoint: Path) -> dict:
    """The options of the ``siamese train`` run that wrote ``checkpoint``, as the command takes them."""
    from ..trainer import read_checkpoint

    saved = read_checkpoint(checkpoint)[2].get("run", {}).get("cli")
    if not saved:
        raise ConfigError(
            f"{checkpoint}: this checkpoint was written by the Python API, not siamese train; "
            "resume it with train(..., checkpoint=..., resume=True)"
        )
    paths = {"out", "val_data", "glove", "checkpoint"}
    options = {
        k: Path(v) if k in paths and v is not None else v
        for k, v in saved.items()
        if k not in ("quiet", "as_json", "resume")
    }
    options["data"] = [Path(p) for p in saved["data"]]
    return options


def _length_range(text: str | None, flag: str) -> list[int] | None:
    """ "3-5" → [3, 5], "4" → [4, 4]; None stays None."""
    if text is None:
        return None
    lo, _, hi = text.partition("-")
    try:
        return [int(lo), int(hi or lo)]
    except ValueError:
        raise ConfigError(f"{flag} takes lengths like 3-5 or 4, got {text!r}") from None


def _encoder_options(pairs: list[str] | None, **named) -> dict:
    """``-o KEY=VALUE`` options (values parsed as JSON, else kept as text) plus the named ones that are set."""
    options = {k: v for k, v in named.items() if v is not None}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _in_workers() -> bool:
    from ..distributed import world

    return world().distributed


def _launch_workers(nproc: int, command, options: dict) -> None:
    """Run ``command(**options)`` on ``nproc`` local workers (siamese.distributed.launch); a user
    error in the workers (rank 0 printed it as ``error: ...``) exits 2 here too."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from ..distributed import launch

    elastic = logging.getLogger("torch.distributed.elastic")
    level = elastic.level
    elastic.setLevel(logging.CRITICAL)  # its traceback of a worker's exit code 2 would bury our one line
    try:
        launch(nproc, _worker, command, options)
    except ChildFailedError as e:
        codes = {failure.exitcode for failure in e.failures.values()}
        if codes == {2}:
            raise typer.Exit(2) from None
        for failure in e.failures.values():
            typer.echo(failure.message if isinstance(failure.message, str) else json.dumps(failure.message), err=True)
        raise SiameseError(f"a training worker failed (exit codes {sorted(codes)})") from None
    finally:
        elastic.setLevel(level)


def _worker(command, options: dict) -> None:
    """One launched worker: the command; a user error is printed once (by rank 0) and exits 2."""
    from ..distributed import world

    try:
        command.__wrapped__(**options)  # without user_errors: every worker would print the same line
    except SiameseError as e:
        if world().main:
            typer.echo(f"error: {e}", err=True)
        sys.exit(2)


@user_errors
def train(
    data: Annotated[
        Optional[list[Path]], typer.Option("--data", help="Labelled pairs to train on (repeat for several files).")
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", help="Model folder to write (only written if training succeeds).")
    ] = None,
    weight: Annotated[
        Optional[list[float]],
        typer.Option(
            "--weight",
            min=0.0,
            help="Sampling weight per --data file, in the same order (default 1 each): 2 draws a set twice per epoch, 0.5 half of it.",
        ),
    ] = None,
    encoder: Annotated[
        str,
        typer.Option(
            help="lstm, bilstm, bilstm-max, cnn, bow (weighted bag of words; -o ngrams=2 adds word pairs) or transformer."
        ),
    ] = "lstm",
    head: Annotated[str, typer.Option(help="cosine, manhattan, l1, concat or symmetric.")] = "cosine",
    loss: Annotated[
        Optional[str],
        typer.Option(
            help="triplet (default), hinge (default with --answers), mnr; contrastive, cosent or bce (labelled pairs); distill (any pairs, with --teacher)."
        ),
    ] = None,
    teacher: Annotated[
        Optional[str],
        typer.Option(
            help="With --loss distill: the model to imitate: a Siamese or Hugging Face model folder, or a name: mpnet (all-mpnet-base-v2; make mpnet), minilm."
        ),
    ] = None,
    cross: Annotated[
        bool,
        typer.Option(
            "--cross",
            help="Train a cross-encoder (both texts read together by --transformer; pairs only, no vectors): the most accurate verdicts.",
        ),
    ] = False,
    prior: Annotated[
        Optional[str],
        typer.Option(
            "--prior",
            help="With --cross: a bi-encoder (minilm, mpnet, a sentence-transformers or Siamese model folder) whose cosine the cross-encoder starts from and corrects; saved inside the model folder.",
        ),
    ] = None,
    answers: Annotated[
        bool,
        typer.Option(
            "--answers",
            help="--data/--val-data are answer-selection sets (TrecQA CSV qtext,label,atext or a WikiQA folder): train on (question, right, wrong) triplets, report MAP/MRR.",
        ),
    ] = False,
    negatives: Annotated[int, typer.Option(min=1, help="With --answers: wrong answers drawn per right answer.")] = 5,
    pooling: Annotated[
        Optional[str],
        typer.Option(help="Encoder pooling: mean, max, last, attention (recurrent), cls, pooler (transformer)."),
    ] = None,
    glove: Annotated[
        Optional[Path], typer.Option(help="GloVe vectors (glove.*.txt or .json) to start the word embedding from.")
    ] = None,
    transformer: Annotated[
        Optional[str],
        typer.Option(
            help="--encoder transformer: a local Hugging Face model folder, or a name: minilm (all-MiniLM-L6-v2, the default), mpnet (all-mpnet-base-v2; make mpnet)."
        ),
    ] = None,
    frozen_layers: Annotated[
        int, typer.Option(min=0, help="Transformer: keep the embeddings and the first N layers fixed.")
    ] = 0,
    option: Annotated[
        Optional[list[str]],
        typer.Option(
            "--option",
            "-o",
            help="Other encoder keyword as KEY=VALUE (JSON value), e.g. -o hidden=128 -o kernel_sizes=[2,3].",
        ),
    ] = None,
    val_data: Annotated[
        Optional[Path], typer.Option("--val-data", help="Validation pairs (both labels). Default: a split of --data.")
    ] = None,
    val_fraction: Annotated[
        float,
        typer.Option(min=0.0, max=0.9, help="Share of --data held out for validation when --val-data is not given."),
    ] = 0.1,
    test_fraction: Annotated[
        float,
        typer.Option(
            min=0.0, max=0.9, help="Share of --data held out as a test split (both labels), evaluated after training."
        ),
    ] = 0.0,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    epochs: Annotated[
        Optional[int], typer.Option(min=1, help="Passes over the data (default 5; 1 with --cross).")
    ] = None,
    batch_size: Annotated[
        Optional[int], typer.Option(min=2, help="Pairs per step (default 256; 16 with --cross).")
    ] = None,
    lr: Annotated[
        Optional[float],
        typer.Option(
            min=0.0,
            help="Adam learning rate (default: 0.01 lstm and bow, 1e-3 other word encoders, 2e-6 transformer, 2e-5 --cross).",
        ),
    ] = None,
    dim: Annotated[
        Optional[int], typer.Option(min=1, help="LSTM width; embedding width of the other word encoders.")
    ] = None,
    warmup_steps: Annotated[
        int,
        typer.Option(
            min=0, help="Raise the learning rate linearly over the first N steps (for fine-tuning a transformer)."
        ),
    ] = 0,
    keep_initial: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.99,
            help="Transformer: after training, mix this share of the pretrained weights back in (WiSE-FT), e.g. 0.5.",
        ),
    ] = 0.0,
    margin: Annotated[
        Optional[float],
        typer.Option(help="Loss margin (default: 0.25 triplet, 0.2 hinge, 0.5 contrastive; other losses have none)."),
    ] = None,
    scale: Annotated[
        Optional[float],
        typer.Option(help="Loss scale of the softmax losses (default 20: mnr, cosent; other losses have none)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1)] = 0,
    max_vocab: Annotated[int, typer.Option(min=0, help="Vocabulary size cap (0 = no cap).")] = 50_000,
    oov_buckets: Annotated[
        int,
        typer.Option(
            min=0,
            max=1 << 22,
            help="Hash words outside the vocabulary into this many extra ids instead of [UNK] (0 = all [UNK]), so texts sharing an unseen word share its vector.",
        ),
    ] = 0,
    char_ngrams: Annotated[
        Optional[str],
        typer.Option(
            help="Bag of words: also pool each word's character n-grams of these lengths, e.g. 3-5 (fastText subwords), so word forms and misspellings overlap."
        ),
    ] = None,
    char_buckets: Annotated[
        int, typer.Option(min=1, help="Ids the character n-grams are hashed into (with --char-ngrams).")
    ] = 1 << 17,
    lowercase: Annotated[bool, typer.Option("--lowercase/--keep-case")] = True,
    precision: Annotated[
        str,
        typer.Option(
            help="auto (bf16 where the CPU has it natively, else fp32; on a CUDA GPU bf16, else fp16, "
            "for transformers), bf16 (fast, fp32 weights), fp16 (CUDA) or fp32."
        ),
    ] = "auto",
    threshold_metric: Annotated[
        str, typer.Option(help="What the validation threshold maximises: accuracy or f1.")
    ] = "accuracy",
    target_precision: TargetPrecisionOpt = None,
    target_recall: TargetRecallOpt = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate/--no-calibrate",
            help="Fit the similarity -> probability calibration on the validation pairs (skipped, with a note, when they lack a label or are graded).",
        ),
    ] = True,
    checkpoint: Annotated[
        Optional[Path],
        typer.Option(
            help="After every epoch, rewrite this folder: a model folder of that epoch's weights plus what --resume needs."
        ),
    ] = None,
    resume: Annotated[
        Optional[Path],
        typer.Option(
            help="Continue the killed run that wrote this --checkpoint folder (its options are read from it; it ends after the same epochs)."
        ),
    ] = None,
    workers: Annotated[
        Optional[int],
        typer.Option(min=1, help="Threads encoding parts of each batch in parallel (default: one per core)."),
    ] = None,
    device: DeviceOpt = "auto",
    nproc: Annotated[
        int,
        typer.Option(
            min=1,
            help="Train on N local worker processes (torch.distributed: DDP, gloo on CPUs, nccl on GPUs), each on its shard of every batch; across machines use torchrun --nnodes M --nproc-per-node N -m siamese train ...",
        ),
    ] = 1,
    gather: Annotated[
        bool,
        typer.Option(
            "--gather/--no-gather",
            help="With several workers: the loss of the whole batch, its vectors gathered from every worker (as one process); --no-gather: each worker's shard alone (fewer in-batch negatives).",
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Train a Siamese model: by default the LSTM with the hard-negative triplet loss on duplicate pairs."""
    given = dict(locals())
    if nproc > 1 and not _in_workers():  # the launched workers run this command again, as torchrun's do
        return _launch_workers(nproc, train, given)
    command = {
        k: [str(p) for p in v] if isinstance(v, list) else str(v) if isinstance(v, Path) else v
        for k, v in given.items()
    }  # this run's options, kept in the checkpoint for --resume
    if resume is not None and data is None:
        return train(**_saved_train_options(resume), resume=resume, quiet=quiet, as_json=as_json)
    if not data or out is None:
        raise ConfigError("give --data FILE and --out DIR (or --resume CHECKPOINT to continue a run)")
    _check_out(out, overwrite, inputs=[*data, val_data, glove, teacher, prior, transformer])
    from ..calibration import check_targets
    from ..data import Pairs, split_pairs
    from ..losses import LossConfig, build_loss
    from ..model import ModelConfig
    from ..training import TrainConfig
    from ..training import train as run_training

    check_targets(target_precision, target_recall)  # before reading or training
    loss = loss or ("hinge" if answers else "triplet")
    loss_options = LossConfig(margin=margin, scale=scale)
    build_loss(loss, loss_options)  # a margin or scale this loss has not: refused before reading anything
    test = None
    if cross and (answers or encoder != "lstm" or head != "cosine" or loss != "triplet"):
        raise ConfigError(
            "--cross trains a cross-encoder on labelled pairs: it takes --transformer, not --answers, "
            "--encoder, --head or --loss"
        )
    if prior is not None and not cross:
        raise ConfigError("--prior is the bi-encoder a cross-encoder corrects: it needs --cross")
    if answers:
        pairs, val, val_questions = _answer_triplets(data, val_data, val_fraction, negatives, seed)
    else:
        parts = [_read(p, format, text1, text2, label) for p in data]
        if weight:
            if len(weight) != len(parts):
                raise ConfigError(
                    f"--weight given {len(weight)} times for {len(parts)} --data files; give one per file"
                )
            if not any(weight):
                raise ConfigError(
                    "every --weight is 0: nothing would be trained on; give at least one file a weight above 0"
                )
            parts = [part.with_weight(w) for part, w in zip(parts, weight)]
        pairs = Pairs.concat(parts)
        if test_fraction > 0:
            test, pairs = split_pairs(pairs, [test_fraction], seed=seed)
        if val_data is not None:
            val = _read(val_data, format, text1, text2, label)
        else:
            val, pairs = split_pairs(pairs, [val_fraction], seed=seed)
    if cross:
        return _train_cross(
            pairs,
            val,
            test,
            out=out,
            transformer=transformer,
            prior=prior,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            precision=precision,
            device=device,
            threshold_metric=threshold_metric,
            calibrate=calibrate,
            checkpoint=resume or checkpoint,
            resume=resume is not None,
            run={"cli": {**command, "resume": None}},
            overwrite=overwrite,
            quiet=quiet,
            as_json=as_json,
        )
    defaults = TrainConfig()
    config = TrainConfig(
        epochs=epochs or defaults.epochs,
        batch_size=batch_size or defaults.batch_size,
        lr=lr,
        loss_options=loss_options,
        seed=seed,
        warmup_steps=warmup_steps,
        keep_initial=keep_initial,
        teacher=teacher,
        precision=precision,
        threshold_metric=threshold_metric,
        workers=workers,
        calibrate=calibrate,
        target_precision=target_precision,
        target_recall=target_recall,
        device=device,
        gather=gather,
    )
    options = _encoder_options(option, pooling=pooling, path=transformer, frozen_layers=frozen_layers or None)
    model_config = ModelConfig(
        encoder=encoder,
        head=head,
        loss=loss,
        dim=dim,
        encoder_options=options,
        glove=str(glove) if glove else None,
        seed=seed,
        lowercase=lowercase,
        max_vocab=max_vocab or None,
        oov_buckets=oov_buckets,
        char_ngrams=_length_range(char_ngrams, "--char-ngrams"),
        char_buckets=char_buckets,
    )
    model = run_training(
        pairs,
        val,
        model_config=model_config,
        config=config,
        checkpoint=resume or checkpoint,
        resume=resume is not None,
        run={"cli": {**command, "resume": None}},
        progress=not quiet,
    )
    if "threshold" not in model.info["training"]:  # a worker other than rank 0: it writes and says nothing
        return
    model.save(out, overwrite=overwrite)
    info = model.info["training"]
    last = info["history"][-1]
    result = {
        "out": str(out),
        "train_pairs": info["train_pairs"],
        "val_pairs": info["val_pairs"],
        "epochs": len(info["history"]),
        "best_epoch": info["best_epoch"],
        "loss": last["loss"],
        "val_loss": last.get("val_loss"),
        "threshold": info["threshold"],
        "pairs_per_second": info["pairs_per_second"],
        "warmup_seconds": info["warmup_seconds"],
        "seconds": info["seconds"],
        "recipe": {"encoder": encoder, "head": head, "loss": loss},
        "threshold_choice": info["threshold_choice"],
        "calibration": info["calibration"],
    }
    lines = []
    if info["calibration"]["fitted"]:
        lines.append(f"calibrated on the validation pairs: {info['calibration']['method']}")
    elif calibrate:
        lines.append(f"not calibrated ({info['calibration']['note']})")
    if answers:
        from ..answers import ranking_report

        result["validation_ranking"] = ranking_report(model.similarity, val_questions)
        r = result["validation_ranking"]
        lines.append(f"validation ranking ({r['questions']} questions): MAP {r['map']:.4f}, MRR {r['mrr']:.4f}")
    if "glove" in model.info:
        result["glove"] = model.info["glove"]
        lines.append(
            f"GloVe covers {result['glove']['covered']} of {result['glove']['total']} words ({100 * result['glove']['fraction']:.1f}%)"
        )
    if test is not None:
        from ..evaluation import evaluate as run_evaluation

        result["test"] = run_evaluation(model, test)
        t = result["test"]
        lines.append(
            f"held-out test split ({t['n']} pairs): accuracy {t['accuracy']:.4f}, F1 {t['f1']:.4f}, ROC-AUC {t['roc_auc']:.4f}"
        )
    _emit(
        result,
        as_json,
        [
            f"trained on {result['train_pairs']} pairs for {result['epochs']} epochs in {result['seconds']:.1f}s "
            f"({result['pairs_per_second']:.0f} pairs/s); best epoch {result['best_epoch']}",
            f"threshold {result['threshold']:.4f} ({_threshold_source(result['val_pairs'])})",
            f"saved to {out}",
        ]
        + lines,
    )


@user_errors
def distill_command(
    out: Annotated[
        Path, typer.Option("--out", help="Model folder to write (a bag-of-words model: every command takes it).")
    ],
    teacher: Annotated[
        str,
        typer.Option(
            help="The model to imitate: minilm (all-MiniLM-L6-v2), mpnet (make mpnet), or a Siamese, sentence-transformers or Hugging Face folder."
        ),
    ] = "minilm",
    data: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--data",
            help="Corpus files (repeat): .txt one text per line, a CSV/TSV column (--column), or a pair file (both texts). Default: every text of the shared pair sets outside their test splits.",
        ),
    ] = None,
    column: Annotated[Optional[str], typer.Option(help="The CSV/TSV column holding the corpus texts.")] = None,
    dim: Annotated[int, typer.Option(min=2, help="Student width (at most the teacher's).")] = StaticConfig.dim,
    vocabulary: Annotated[
        str, typer.Option(help="subwords (the teacher's WordPiece tokens + frequent corpus words) or words.")
    ] = StaticConfig.vocabulary,
    extra_words: Annotated[
        int, typer.Option(min=0, help="subwords: corpus words added as tokens of their own.")
    ] = StaticConfig.extra_words,
    epochs: Annotated[
        int,
        typer.Option(
            min=0,
            help="Passes over the corpus matching the teacher's vectors (0: the teacher's token vectors only, as model2vec).",
        ),
    ] = StaticConfig.epochs,
    lr: Annotated[
        float, typer.Option(min=0.0, help="Adam learning rate for the token vectors and weights.")
    ] = StaticConfig.lr,
    relational: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Weight of the in-batch similarity term (the student finds the same texts close as the teacher; 0: match directions only).",
        ),
    ] = StaticConfig.relational,
    fine_tune: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--fine-tune", help="Labelled pairs to fine-tune the student on afterwards (repeat for several files)."
        ),
    ] = None,
    fine_tune_loss: Annotated[
        str, typer.Option(help="Loss of the fine-tuning: mnr, cosent, contrastive, triplet, ...")
    ] = "mnr",
    fine_tune_epochs: Annotated[int, typer.Option(min=1)] = 1,
    fine_tune_lr: Annotated[float, typer.Option(min=0.0)] = 1e-3,
    val_data: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--val-data",
            help="Labelled pairs to choose the threshold on (repeat). Default: the shared validation sets.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1)] = StaticConfig.seed,
    device: DeviceOpt = "auto",
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Distil a teacher into a static student: token vectors pooled like the bag of words, ~100x faster than MiniLM."""
    from ..data import Pairs
    from ..datasets import validation_sets
    from ..distill import distill, read_corpus

    _check_out(out, overwrite, inputs=[teacher, *(data or []), *(fine_tune or []), *(val_data or [])])
    config = StaticConfig(
        dim=dim, vocabulary=vocabulary, extra_words=extra_words, epochs=epochs, lr=lr, relational=relational, seed=seed
    )
    config.check()
    texts = read_corpus(data, column=column) if data else None
    val = [_read(p, "auto", None, None, None) for p in val_data] if val_data else validation_sets()
    tune = Pairs.concat([_read(p, "auto", None, None, None) for p in fine_tune]) if fine_tune else None
    student = distill(
        teacher,
        texts,
        config=config,
        val_pairs=val,
        fine_tune=tune,
        fine_tune_loss=fine_tune_loss,
        fine_tune_epochs=fine_tune_epochs,
        fine_tune_lr=fine_tune_lr,
        progress=not as_json,
        device=device,
    )
    student.save(out, overwrite=overwrite)
    info = student.info["distillation"]
    choice = info["threshold_choice"]
    kept = next(h for h in info["history"] if h.get("kept"))
    result = {
        "out": str(out),
        "teacher": info["teacher"].get("source"),
        "corpus_texts": info["corpus_texts"],
        "tokens": info["tokens"],
        "dim": student.dim,
        "kept_epoch": kept["epoch"],
        "val_cosine": kept["val_cosine"],
        "best_val_cosine": max((h["val_cosine"] or 0) for h in info["history"]),
        "threshold": choice["threshold"],
        "seconds": info["seconds"],
        "fine_tuned": "fine_tune" in info,
    }
    _emit(
        result,
        as_json,
        [
            f"student of {result['teacher']}: {info['tokens']:,} tokens x {student.dim}, learned on {info['corpus_texts']:,} texts "
            f"in {info['seconds']:.0f} s (epoch {kept['epoch']} kept; held-out cosine to the teacher {kept['val_cosine'] or 0:.3f})",
            f"threshold {choice['threshold']:.4f} ({_threshold_source(choice['val_pairs'])})",
            f"saved to {out}",
        ],
    )


@user_errors
def export(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (a transformer with the cosine head).")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Folder to write: config.json, tokenizer.json, model.onnx (only if the export succeeds)."
        ),
    ],
    format: Annotated[str, typer.Option("--format", help="onnx: the encoder runs in ONNX Runtime.")] = "onnx",
    quantize: Annotated[
        Optional[str],
        typer.Option(help="int8: dynamic int8 quantisation of the matmuls (faster, 4x smaller, vectors slightly off)."),
    ] = None,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Export a model for fast CPU inference; every command opens the exported folder like any model folder."""
    from ..export import check_export_options, export_model
    from ..model import SiameseModel

    check_export_options(format, quantize)  # before the model is loaded
    _check_out(out, overwrite, inputs=[model_dir])
    # ONNX is traced on the CPU, where ONNX Runtime then runs it
    result = export_model(
        SiameseModel.load(model_dir, device="cpu"), out, format=format, quantize=quantize, overwrite=overwrite
    )
    _emit(
        result,
        as_json,
        [
            f"exported {model_dir} to {out} ({format}{', ' + quantize if quantize else ''}, "
            f"{result['bytes'] / 1e6:.1f} MB; cosine to the PyTorch model >= {result['min_cosine']:.4f})"
        ],
    )


@user_errors
def pretrained_model(
    source: Annotated[
        str,
        typer.Argument(
            help="minilm (all-MiniLM-L6-v2), mpnet (all-mpnet-base-v2; make mpnet), or a local sentence-transformers or Hugging Face model folder."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Model folder to write.")],
    val_data: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--val-data",
            help="Labelled pairs to choose the threshold on (repeat for several files). Default: the shared validation sets (msrp-val, sts-dev, sick-trial).",
        ),
    ] = None,
    max_length: Annotated[
        Optional[int],
        typer.Option(min=1, help="Tokens kept per text (default: the folder's max_seq_length, else 128)."),
    ] = None,
    threshold_metric: Annotated[
        str, typer.Option(help="What the threshold maximises on the validation pairs: accuracy or f1.")
    ] = "accuracy",
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    device: DeviceOpt = "auto",
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Save a pretrained sentence encoder, untrained, as a Siamese model (cosine head, threshold chosen on validation pairs)."""
    _check_out(out, overwrite, inputs=[Path(source)])
    from ..datasets import validation_sets
    from ..sentence_encoder import from_pretrained

    parts = [_read(p, format, text1, text2, label) for p in val_data] if val_data else validation_sets()
    model = from_pretrained(source, parts, max_length=max_length, metric=threshold_metric, device=device)
    model.save(out, overwrite=overwrite)
    info = model.info["pretrained"]
    choice = info["threshold_choice"]
    result = {
        "out": str(out),
        "source": source,
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
    _emit(
        result,
        as_json,
        [
            f"{source}: {info['pooling']} pooling, {info['dim']}-d, up to {info['max_length']} tokens per text",
            f"threshold {choice['threshold']:.4f} ({choice['metric']} {choice['value']:.4f} on {choice['val_pairs']} "
            f"validation pairs: {', '.join(choice['chosen_on'])})",
            f"saved to {out}",
        ],
    )
