"""``siamese train``, ``distill``, ``export`` and ``pretrained``: commands that write a model folder.
Also the ``train --nproc N`` launcher (local torch.distributed workers) and ``train --resume``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..distill.config import StaticConfig
from ..errors import ConfigError, SiameseError
from ..options import declared_options
from ..options import option as declare
from .common import (
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    LabelOpt,
    OverwriteOpt,
    Text1Opt,
    Text2Opt,
    _check_out,
    _emit,
    _read,
    user_errors,
)
from .declared import declared_command, is_path


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


@dataclass
class TrainCommand:
    """The options of ``siamese train`` beyond the configurations (siamese.configs): the files,
    the splits, the run's control. The command is generated from these and the configurations."""

    data: Optional[list[Path]] = declare(
        None, "Labelled pairs to train on (repeat for several files).", flags=("--data",)
    )
    out: Optional[Path] = declare(None, "Model folder to write (only written if training succeeds).", flags=("--out",))
    weight: Optional[list[float]] = declare(
        None,
        "Sampling weight per --data file, in the same order (default 1 each): 2 draws a set twice per epoch, "
        "0.5 half of it.",
        min=0.0,
    )
    val_data: Optional[Path] = declare(None, "Validation pairs (both labels). Default: a split of --data.")
    val_fraction: float = declare(
        0.1, "Share of --data held out for validation when --val-data is not given.", min=0.0, max=0.9
    )
    test_fraction: float = declare(
        0.0, "Share of --data held out as a test split (both labels), evaluated after training.", min=0.0, max=0.9
    )
    format: str = declare("auto", cli_type=FormatOpt)
    text1: Optional[str] = declare(None, cli_type=Text1Opt)
    text2: Optional[str] = declare(None, cli_type=Text2Opt)
    label: Optional[str] = declare(None, cli_type=LabelOpt)
    answers: bool = declare(
        False,
        "--data/--val-data are answer-selection sets (TrecQA CSV qtext,label,atext or a WikiQA folder): "
        "train on (question, right, wrong) triplets, report MAP/MRR.",
        flags=("--answers",),
    )
    negatives: int = declare(5, "With --answers: wrong answers drawn per right answer.", min=1)
    # encoder_options of ModelConfig: the named ones, then any other as -o KEY=VALUE
    transformer: Optional[str] = declare(
        None,
        "--encoder transformer or --cross: a local Hugging Face model folder, or a name: minilm "
        "(all-MiniLM-L6-v2, the default), mpnet (all-mpnet-base-v2; make mpnet).",
    )
    prior: Optional[str] = declare(
        None,
        "With --cross: a bi-encoder (minilm, mpnet, a sentence-transformers or Siamese model folder) whose "
        "cosine the cross-encoder starts from and corrects; saved inside the model folder.",
        flags=("--prior",),
    )
    pooling: Optional[str] = declare(
        None, "Encoder pooling: mean, max, last, attention (recurrent), cls, pooler (transformer)."
    )
    frozen_layers: int = declare(0, "Transformer: keep the embeddings and the first N layers fixed.", min=0)
    option: Optional[list[str]] = declare(
        None,
        "Other encoder keyword as KEY=VALUE (JSON value), e.g. -o hidden=128 -o kernel_sizes=[2,3].",
        flags=("--option", "-o"),
    )
    checkpoint: Optional[Path] = declare(
        None,
        "After every epoch, rewrite this folder: a model folder of that epoch's weights plus what --resume needs.",
    )
    resume: Optional[Path] = declare(
        None,
        "Continue the killed run that wrote this --checkpoint folder (its options are read from it; it ends "
        "after the same epochs).",
    )
    nproc: int = declare(
        1,
        "Train on N local worker processes (torch.distributed: DDP, gloo on CPUs, nccl on GPUs), each on its "
        "shard of every batch; across machines use torchrun --nnodes M --nproc-per-node N -m siamese train ...",
        min=1,
    )
    quiet: bool = declare(False, "No progress bars.", flags=("--quiet", "-q"))
    overwrite: bool = declare(False, cli_type=OverwriteOpt)
    as_json: bool = declare(False, cli_type=JsonOpt)


def _train_options() -> tuple[type, ...]:
    from ..configs import ModelConfig, TrainConfig

    return (TrainCommand, ModelConfig, TrainConfig)


def _serialised(options: dict) -> dict:
    """The declared options as JSON (paths as text): what a checkpoint keeps for --resume."""

    def text(value):
        return str(value) if isinstance(value, Path) else value

    return {k: [text(x) for x in v] if isinstance(v, list) else text(v) for k, v in options.items()}


def _restored(saved: dict) -> dict:
    """Option values back from :func:`_serialised`, paths as paths again (by their declared types)."""
    options = dict(saved)
    for d in declared_options(*_train_options()):
        value = options.get(d.name)
        if value is not None and is_path(d.type):
            options[d.name] = [Path(v) for v in value] if isinstance(value, list) else Path(value)
    return options


def _saved_train_options(checkpoint: Path) -> dict:
    """The options of the ``siamese train`` run that wrote ``checkpoint``."""
    from ..trainer import read_checkpoint

    saved = read_checkpoint(checkpoint)[2].get("run", {}).get("cli")
    if not saved:
        raise ConfigError(
            f"{checkpoint}: this checkpoint was written by the Python API, not siamese train; "
            "resume it with train(..., checkpoint=..., resume=True)"
        )
    defaults = {d.name: d.default for d in declared_options(*_train_options())}  # options added since
    return _restored({**defaults, **saved})


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


def _launch_workers(options: dict) -> None:
    """Run the training on ``--nproc`` local workers (siamese.distributed.launch), each given the
    same options; a user error in the workers (rank 0 printed it as ``error: ...``) exits 2 here too."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from ..distributed import launch

    elastic = logging.getLogger("torch.distributed.elastic")
    level = elastic.level
    elastic.setLevel(logging.CRITICAL)  # its traceback of a worker's exit code 2 would bury our one line
    try:
        launch(options["nproc"], _worker, options)
    except ChildFailedError as e:
        codes = {failure.exitcode for failure in e.failures.values()}
        if codes == {2}:
            raise typer.Exit(2) from None
        for failure in e.failures.values():
            typer.echo(failure.message if isinstance(failure.message, str) else json.dumps(failure.message), err=True)
        raise SiameseError(f"a training worker failed (exit codes {sorted(codes)})") from None
    finally:
        elastic.setLevel(level)


def _worker(options: dict) -> None:
    """One launched worker: the training; a user error is printed once (by rank 0) and exits 2."""
    from ..distributed import world

    try:
        _run_train(options)  # without user_errors: every worker would print the same line
    except SiameseError as e:
        if world().main:
            typer.echo(f"error: {e}", err=True)
        sys.exit(2)


def _recipe(options: dict):
    """The checked configurations (siamese.training.prepare) from the options, before any data is read."""
    from ..configs import ModelConfig, TrainConfig
    from ..options import from_options
    from ..training import prepare

    values = {**options, "loss": options["loss"] or ("hinge" if options["answers"] else None)}
    if options["cross"]:
        bi_encoder_only = options["answers"] or (options["encoder"], options["head"]) != ("lstm", "cosine")
        if bi_encoder_only or options["loss"] not in (None, "triplet"):
            raise ConfigError(
                "--cross trains a cross-encoder on labelled pairs: it takes --transformer, not --answers, "
                "--encoder, --head or --loss"
            )
        values["encoder"] = "transformer"
    elif options["prior"] is not None:
        raise ConfigError("--prior is the bi-encoder a cross-encoder corrects: it needs --cross")
    values["encoder_options"] = _encoder_options(
        options["option"],
        pooling=options["pooling"],
        path=options["transformer"],
        frozen_layers=options["frozen_layers"] or None,
        prior=options["prior"],
    )
    return prepare(from_options(ModelConfig, values), from_options(TrainConfig, values))


def _train_data(options: dict):
    """Training, validation and test pairs (test: None unless --test-fraction), and with --answers
    the validation questions."""
    from ..data import Pairs, split_pairs

    data, val_data, seed = options["data"], options["val_data"], options["seed"]
    if options["answers"]:
        pairs, val, val_questions = _answer_triplets(
            data, val_data, options["val_fraction"], options["negatives"], seed
        )
        return pairs, val, None, val_questions
    how = (options["format"], options["text1"], options["text2"], options["label"])
    parts = [_read(p, *how) for p in data]
    weight = options["weight"]
    if weight:
        if len(weight) != len(parts):
            raise ConfigError(f"--weight given {len(weight)} times for {len(parts)} --data files; give one per file")
        if not any(weight):
            raise ConfigError(
                "every --weight is 0: nothing would be trained on; give at least one file a weight above 0"
            )
        parts = [part.with_weight(w) for part, w in zip(parts, weight)]
    pairs, test = Pairs.concat(parts), None
    if options["test_fraction"] > 0:
        test, pairs = split_pairs(pairs, [options["test_fraction"]], seed=seed)
    if val_data is not None:
        val = _read(val_data, *how)
    else:
        val, pairs = split_pairs(pairs, [options["val_fraction"]], seed=seed)
    return pairs, val, test, None


def _run_train(options: dict) -> None:
    """``siamese train`` with its options as one dict (see :class:`TrainCommand` and siamese.configs)."""
    if options["nproc"] > 1 and not _in_workers():  # the launched workers run this again, as torchrun's do
        return _launch_workers(options)
    resume = options["resume"]
    if resume is not None and not options["data"]:
        options = {**_saved_train_options(resume), **{k: options[k] for k in ("resume", "quiet", "as_json")}}
    if not options["data"] or options["out"] is None:
        raise ConfigError("give --data FILE and --out DIR (or --resume CHECKPOINT to continue a run)")
    reads = [*options["data"], *(options[k] for k in ("val_data", "glove", "teacher", "prior", "transformer"))]
    _check_out(options["out"], options["overwrite"], inputs=reads)
    from ..training import train as run_training

    recipe = _recipe(options)  # the configurations checked before reading or training
    pairs, val, test, val_questions = _train_data(options)
    model = run_training(
        pairs,
        val,
        recipe=recipe,
        checkpoint=resume or options["checkpoint"],
        resume=resume is not None,
        run={"cli": _serialised({**options, "resume": None})},
        progress=not options["quiet"],
    )
    if "threshold" not in model.info["training"]:  # a worker other than rank 0: it writes and says nothing
        return
    model.save(options["out"], overwrite=options["overwrite"])
    result, lines = _train_report(model, options, val_questions, test)
    _emit(result, options["as_json"], lines)


def _pairs_used(info: dict, loss: str) -> str:
    """Which pairs the loss learned from, in words."""
    used, given = info["train_pairs"], info.get("given_pairs", info["train_pairs"])
    how = {
        "positives": f"duplicate pairs of {given}: the {loss} loss learns from duplicates, "
        "the rest of the batch gives negatives",
        "labelled": f"labelled pairs: the {loss} loss learns from both labels",
        "pairs": f"pairs: the {loss} loss learns from every pair whatever its label",
        "triplets": f"triplets: the {loss} loss learns from (question, right, wrong) answers",
    }.get(info.get("trains_on"), "pairs")
    return f"{used} {how}"


def _threshold_line(threshold: float, choice: dict, val_pairs: int) -> str:
    """The threshold rounded for people (full precision in --json) and how it was chosen."""
    if "note" in choice:
        return f"threshold {threshold:.3f} ({choice['note']})"
    return f"threshold {threshold:.3f} ({_threshold_source(val_pairs)})"


def _train_report(model, options: dict, val_questions, test) -> tuple[dict, list[str]]:
    """The result (--json) and the lines a person reads."""
    info = model.info["training"]
    last = info["history"][-1]
    cross = options["cross"]
    result = {
        "out": str(options["out"]),
        **({"kind": "cross"} if cross else {}),
        "train_pairs": info["train_pairs"],
        "val_pairs": info["val_pairs"],
        "epochs": len(info["history"]),
        "best_epoch": info["best_epoch"],
        "loss": last["loss"],
        "val_loss": last.get("val_loss"),
        "threshold": model.threshold,
        "pairs_per_second": info["pairs_per_second"],
        "warmup_seconds": info["warmup_seconds"],
        "seconds": info["seconds"],
        "recipe": {"encoder": model.config.encoder, "head": model.config.head, "loss": info["loss"]}
        if not cross
        else {"transformer": options["transformer"] or "minilm", "loss": info["loss"]},
        "trains_on": info.get("trains_on"),
        "threshold_choice": info["threshold_choice"],
        "calibration": info["calibration"],
    }
    what = "cross-encoder trained" if cross else "trained"
    lines = [
        f"{what} on {_pairs_used(info, info['loss'])}, for {result['epochs']} epochs in {result['seconds']:.1f}s "
        f"({result['pairs_per_second']:.0f} pairs/s); best epoch {result['best_epoch']}",
        _threshold_line(model.threshold, info["threshold_choice"], result["val_pairs"]),
        f"saved to {options['out']}",
    ]
    if info["calibration"]["fitted"]:
        lines.append(f"calibrated on the validation pairs: {info['calibration']['method']}")
    elif options["calibrate"]:
        lines.append(f"not calibrated ({info['calibration']['note']})")
    if val_questions is not None:
        from ..answers import ranking_report

        result["validation_ranking"] = r = ranking_report(model.similarity_pairwise, val_questions)
        lines.append(f"validation ranking ({r['questions']} questions): MAP {r['map']:.4f}, MRR {r['mrr']:.4f}")
    if "glove" in model.info:
        result["glove"] = g = model.info["glove"]
        lines.append(f"GloVe covers {g['covered']} of {g['total']} words ({100 * g['fraction']:.1f}%)")
    if test is not None:
        from ..evaluation import evaluate as run_evaluation

        result["test"] = t = run_evaluation(model, test)
        f1 = f", F1 {t['f1']:.4f}" if "f1" in t else ""
        lines.append(
            f"held-out test split ({t['n']} pairs): accuracy {t['accuracy']:.4f}{f1}, ROC-AUC {t['roc_auc']:.4f}"
        )
    return result, lines


train = user_errors(
    declared_command(
        _run_train,
        TrainCommand,
        *_train_options()[1:],
        doc="Train a Siamese model: by default the LSTM with the hard-negative triplet loss on duplicate pairs; "
        "--cross trains a cross-encoder.",
    )
)
train.__name__ = train.__qualname__ = "train"


@user_errors
def distill_command(
    out: Annotated[
        Path, typer.Option("--out", help="Model folder to write (a bag-of-words model: every command takes it).")
    ],
    teacher: Annotated[
        str,
        typer.Option(
            help=(
                "The model to imitate: minilm (all-MiniLM-L6-v2), mpnet (make mpnet), or a Siamese, "
                "sentence-transformers or Hugging Face folder."
            )
        ),
    ] = "minilm",
    data: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--data",
            help=(
                "Corpus files (repeat): .txt one text per line, a CSV/TSV column (--column), or a pair file (both "
                "texts). Default: every text of the shared pair sets outside their test splits."
            ),
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
            help=(
                "Passes over the corpus matching the teacher's vectors (0: the teacher's token vectors only, as "
                "model2vec)."
            ),
        ),
    ] = StaticConfig.epochs,
    lr: Annotated[
        float, typer.Option(min=0.0, help="Adam learning rate for the token vectors and weights.")
    ] = StaticConfig.lr,
    relational: Annotated[
        float,
        typer.Option(
            min=0.0,
            help=(
                "Weight of the in-batch similarity term (the student finds the same texts close as the teacher; 0: "
                "match directions only)."
            ),
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
            f"student of {result['teacher']}: {info['tokens']:,} tokens x {student.dim}, learned on "
            f"{info['corpus_texts']:,} texts "
            f"in {info['seconds']:.0f} s (epoch {kept['epoch']} kept; held-out cosine to the teacher "
            f"{kept['val_cosine'] or 0:.3f})",
            f"threshold {choice['threshold']:.3f} ({_threshold_source(choice['val_pairs'])})",
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
            help=(
                "minilm (all-MiniLM-L6-v2), mpnet (all-mpnet-base-v2; make mpnet), or a local sentence-transformers "
                "or Hugging Face model folder."
            )
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Model folder to write.")],
    val_data: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--val-data",
            help=(
                "Labelled pairs to choose the threshold on (repeat for several files). Default: the shared "
                "validation sets (msrp-val, sts-dev, sick-trial)."
            ),
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
    """Save a pretrained sentence encoder, untrained, as a Siamese model (cosine head, threshold chosen on pairs)."""
    _check_out(out, overwrite, inputs=[Path(source)])
    from ..datasets import validation_sets
    from ..sentence_encoder import from_pretrained

    parts = [_read(p, format, text1, text2, label) for p in val_data] if val_data else validation_sets()
    model = from_pretrained(source, parts, max_length=max_length, metric=threshold_metric, device=device, progress=True)
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
            f"threshold {choice['threshold']:.3f} ({choice['metric']} {choice['value']:.4f} on {choice['val_pairs']} "
            f"validation pairs: {', '.join(choice['chosen_on'])})",
            f"saved to {out}",
        ],
    )
