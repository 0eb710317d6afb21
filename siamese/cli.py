"""The ``siamese`` command: parse options, call the Python API, format the result."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .distill.config import StaticConfig
from .errors import ConfigError, SiameseError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Siamese neural networks for semantic similarity.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FormatOpt = Annotated[str, typer.Option("--format", help="Data format: auto, quora, generic, msrp, paws, twitter-url, sick, sts, semeval, mqp.")]
Text1Opt = Annotated[Optional[str], typer.Option("--text1", help="Column holding the first text.")]
Text2Opt = Annotated[Optional[str], typer.Option("--text2", help="Column holding the second text.")]
LabelOpt = Annotated[Optional[str], typer.Option("--label", help="Column holding the 0/1 label.")]
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace --out even when it is a folder of other files (by default only a siamese folder is replaced).")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto (a GPU when there is one, else the CPU), cpu, cuda, cuda:N or mps.")]
EngineOpt = Annotated[str, typer.Option("--engine", help="local (this process) or ray (a Ray cluster: Ray Data actors, one model each; pip install 'siamese[ray]').")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="--engine ray: the cluster to join (ray://HOST:10001 or HOST:6379; default: a local cluster on this machine's CPUs).")]
TargetPrecisionOpt = Annotated[Optional[float], typer.Option(
    "--target-precision", help="Set the threshold to the lowest one reaching this precision on the pairs (error if none does).")]
TargetRecallOpt = Annotated[Optional[float], typer.Option(
    "--target-recall", help="Set the threshold to the highest one reaching this recall on the pairs.")]


def user_errors(fn):
    """Turn a SiameseError into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SiameseError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except OSError as e:  # unreadable input, full disk...: the file and the reason, on one line
            where = f"{e.filename}: " if e.filename else ""
            typer.echo(f"error: {where}{e.strerror or e}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse a bad --out before any work is done (saving checks it again)."""
    from .atomic import check_target

    check_target(out, overwrite=overwrite)


def _read(path: Path, format: str, text1, text2, label):
    from .data import read_pairs

    return read_pairs(path, format, text1=text1, text2=text2, label=label)


def _answer_triplets(data: list[Path], val_data: Path | None, val_fraction: float, negatives: int, seed: int):
    """Training and validation triplets from answer-selection sets, and the validation questions."""
    import numpy as np

    from .answers import make_triplets, read_answers

    questions = [q for path in data for q in read_answers(path)]
    if val_data is not None:
        val_questions = read_answers(val_data)
    else:
        order = np.random.default_rng(seed).permutation(len(questions))
        cut = max(1, round(val_fraction * len(questions)))
        val_questions = [questions[i] for i in order[:cut]]
        questions = [questions[i] for i in order[cut:]]
    source = "+".join(str(p) for p in data)
    return (make_triplets(questions, negatives=negatives, seed=seed, source=source),
            make_triplets(val_questions, negatives=negatives, seed=seed, source=str(val_data or source)), val_questions)


def _train_cross(pairs, val, test, *, out: Path, transformer, epochs, batch_size, lr, seed, precision, threshold_metric,
                 calibrate, checkpoint, resume, run, overwrite, quiet, as_json) -> None:
    """``siamese train --cross``: a cross-encoder from --transformer (default minilm)."""
    from .cross import CrossConfig, CrossTrainConfig, train_cross

    defaults = CrossTrainConfig()
    config = CrossTrainConfig(epochs=epochs or defaults.epochs, batch_size=batch_size or defaults.batch_size,
                              lr=lr or defaults.lr, seed=seed, precision=precision,
                              threshold_metric=threshold_metric, calibrate=calibrate)
    model = train_cross(pairs, val, model_config=CrossConfig(transformer=transformer or "minilm"), config=config,
                        checkpoint=checkpoint, resume=resume, run=run, progress=not quiet)
    model.save(out, overwrite=overwrite)
    info = model.info["training"]
    result = {"out": str(out), "kind": "cross", "train_pairs": info["train_pairs"], "val_pairs": info["val_pairs"],
              "epochs": len(info["history"]), "best_epoch": info["best_epoch"], "loss": info["history"][-1]["loss"],
              "val_loss": info["history"][-1].get("val_loss"), "threshold": model.threshold,
              "pairs_per_second": info["pairs_per_second"], "seconds": info["seconds"], "calibration": info["calibration"]}
    lines = [f"cross-encoder trained on {result['train_pairs']} pairs for {result['epochs']} epochs in {result['seconds']:.1f}s",
             f"threshold {model.threshold:.4f} (chosen on {result['val_pairs']} validation pairs)", f"saved to {out}"]
    if test is not None:
        from .evaluation import evaluate as run_evaluation

        result["test"] = t = run_evaluation(model, test)
        lines.append(f"held-out test split ({t['n']} pairs): accuracy {t['accuracy']:.4f}, ROC-AUC {t['roc_auc']:.4f}")
    _emit(result, as_json, lines)


def _saved_train_options(checkpoint: Path) -> dict:
    """The options of the ``siamese train`` run that wrote ``checkpoint``, as the command takes them."""
    from .trainer import read_checkpoint

    saved = read_checkpoint(checkpoint)[2].get("run", {}).get("cli")
    if not saved:
        raise ConfigError(f"{checkpoint}: this checkpoint was written by the Python API, not siamese train; "
                          "resume it with train(..., checkpoint=..., resume=True)")
    paths = {"out", "val_data", "glove", "checkpoint"}
    options = {k: Path(v) if k in paths and v is not None else v for k, v in saved.items()
               if k not in ("quiet", "as_json", "resume")}
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
    from .distributed import world

    return world().distributed


def _launch_workers(nproc: int, command, options: dict) -> None:
    """Run ``command(**options)`` on ``nproc`` local workers (siamese.distributed.launch); a user
    error in the workers (rank 0 printed it as ``error: ...``) exits 2 here too."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from .distributed import launch

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
    from .distributed import world

    try:
        command.__wrapped__(**options)  # without user_errors: every worker would print the same line
    except SiameseError as e:
        if world().main:
            typer.echo(f"error: {e}", err=True)
        sys.exit(2)


def _corpus_engine(engine: str, address: str | None, device: str, quiet: bool):
    """None (this process) or the Ray engine; Ray is imported only here."""
    from .ray_engine import check_engine

    if check_engine(engine) == "local":
        if address is not None:
            raise ConfigError("--address is the Ray cluster to join: give it with --engine ray")
        return None
    from .ray_engine import RayEngine

    return RayEngine(address, device=device, progress=not quiet)


def _emit(result: dict, as_json: bool, lines: list[str]) -> None:
    if as_json:
        typer.echo(json.dumps(result))
    else:
        typer.echo("\n".join(lines))


@app.command()
@user_errors
def train(
    data: Annotated[Optional[list[Path]], typer.Option("--data", help="Labelled pairs to train on (repeat for several files).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Model folder to write (only written if training succeeds).")] = None,
    weight: Annotated[Optional[list[float]], typer.Option("--weight", min=0.0, help="Sampling weight per --data file, in the same order (default 1 each): 2 draws a set twice per epoch, 0.5 half of it.")] = None,
    encoder: Annotated[str, typer.Option(help="lstm, bilstm, bilstm-max, cnn, bow (weighted bag of words; -o ngrams=2 adds word pairs) or transformer.")] = "lstm",
    head: Annotated[str, typer.Option(help="cosine, manhattan, l1, concat or symmetric.")] = "cosine",
    loss: Annotated[Optional[str], typer.Option(help="triplet (default), hinge (default with --answers), mnr; contrastive, cosent or bce (labelled pairs); distill (any pairs, with --teacher).")] = None,
    teacher: Annotated[Optional[str], typer.Option(help="With --loss distill: the model to imitate: a Siamese or Hugging Face model folder, or a name: mpnet (all-mpnet-base-v2; make mpnet), minilm.")] = None,
    cross: Annotated[bool, typer.Option("--cross", help="Train a cross-encoder (both texts read together by --transformer; pairs only, no vectors): the most accurate verdicts.")] = False,
    answers: Annotated[bool, typer.Option("--answers", help="--data/--val-data are answer-selection sets (TrecQA CSV qtext,label,atext or a WikiQA folder): train on (question, right, wrong) triplets, report MAP/MRR.")] = False,
    negatives: Annotated[int, typer.Option(min=1, help="With --answers: wrong answers drawn per right answer.")] = 5,
    pooling: Annotated[Optional[str], typer.Option(help="Encoder pooling: mean, max, last, attention (recurrent), cls, pooler (transformer).")] = None,
    glove: Annotated[Optional[Path], typer.Option(help="GloVe vectors (glove.*.txt or .json) to start the word embedding from.")] = None,
    transformer: Annotated[Optional[str], typer.Option(help="--encoder transformer: a local Hugging Face model folder, or a name: minilm (all-MiniLM-L6-v2, the default), mpnet (all-mpnet-base-v2; make mpnet).")] = None,
    frozen_layers: Annotated[int, typer.Option(min=0, help="Transformer: keep the embeddings and the first N layers fixed.")] = 0,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Other encoder keyword as KEY=VALUE (JSON value), e.g. -o hidden=128 -o kernel_sizes=[2,3].")] = None,
    val_data: Annotated[Optional[Path], typer.Option("--val-data", help="Validation pairs (both labels). Default: a split of --data.")] = None,
    val_fraction: Annotated[float, typer.Option(min=0.0, max=0.9, help="Share of --data held out for validation when --val-data is not given.")] = 0.1,
    test_fraction: Annotated[float, typer.Option(min=0.0, max=0.9, help="Share of --data held out as a test split (both labels), evaluated after training.")] = 0.0,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    epochs: Annotated[Optional[int], typer.Option(min=1, help="Passes over the data (default 5; 1 with --cross).")] = None,
    batch_size: Annotated[Optional[int], typer.Option(min=2, help="Pairs per step (default 256; 16 with --cross).")] = None,
    lr: Annotated[Optional[float], typer.Option(min=0.0, help="Adam learning rate (default: 0.01 lstm and bow, 1e-3 other word encoders, 2e-6 transformer, 2e-5 --cross).")] = None,
    dim: Annotated[Optional[int], typer.Option(min=1, help="LSTM width; embedding width of the other word encoders.")] = None,
    warmup_steps: Annotated[int, typer.Option(min=0, help="Raise the learning rate linearly over the first N steps (for fine-tuning a transformer).")] = 0,
    keep_initial: Annotated[float, typer.Option(min=0.0, max=0.99, help="Transformer: after training, mix this share of the pretrained weights back in (WiSE-FT), e.g. 0.5.")] = 0.0,
    margin: Annotated[Optional[float], typer.Option(help="Loss margin (default: 0.25 triplet, 0.2 hinge, 0.5 contrastive; other losses have none).")] = None,
    scale: Annotated[Optional[float], typer.Option(help="Loss scale of the softmax losses (default 20: mnr, cosent; other losses have none).")] = None,
    seed: int = 0,
    max_vocab: Annotated[int, typer.Option(help="Vocabulary size cap (0 = no cap).")] = 50_000,
    oov_buckets: Annotated[int, typer.Option(min=0, help="Hash words outside the vocabulary into this many extra ids instead of [UNK] (0 = all [UNK]), so texts sharing an unseen word share its vector.")] = 0,
    char_ngrams: Annotated[Optional[str], typer.Option(help="Bag of words: also pool each word's character n-grams of these lengths, e.g. 3-5 (fastText subwords), so word forms and misspellings overlap.")] = None,
    char_buckets: Annotated[int, typer.Option(min=1, help="Ids the character n-grams are hashed into (with --char-ngrams).")] = 1 << 17,
    lowercase: Annotated[bool, typer.Option("--lowercase/--keep-case")] = True,
    precision: Annotated[str, typer.Option(help="auto (bf16 where the CPU has it natively, else fp32), bf16 (fast, fp32 weights) or fp32.")] = "auto",
    threshold_metric: Annotated[str, typer.Option(help="What the validation threshold maximises: accuracy or f1.")] = "accuracy",
    target_precision: TargetPrecisionOpt = None,
    target_recall: TargetRecallOpt = None,
    calibrate: Annotated[bool, typer.Option("--calibrate/--no-calibrate", help="Fit the similarity -> probability calibration on the validation pairs (skipped, with a note, when they lack a label or are graded).")] = True,
    checkpoint: Annotated[Optional[Path], typer.Option(help="After every epoch, rewrite this folder: a model folder of that epoch's weights plus what --resume needs.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue the killed run that wrote this --checkpoint folder (its options are read from it; it ends after the same epochs).")] = None,
    workers: Annotated[Optional[int], typer.Option(min=1, help="Threads encoding parts of each batch in parallel (default: one per core).")] = None,
    device: DeviceOpt = "auto",
    nproc: Annotated[int, typer.Option(min=1, help="Train on N local worker processes (torch.distributed: DDP, gloo on CPUs, nccl on GPUs), each on its shard of every batch; across machines use torchrun --nnodes M --nproc-per-node N -m siamese train ...")] = 1,
    gather: Annotated[bool, typer.Option("--gather/--no-gather", help="With several workers: the loss of the whole batch, its vectors gathered from every worker (as one process); --no-gather: each worker's shard alone (fewer in-batch negatives).")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Train a Siamese model: by default the LSTM with the hard-negative triplet loss on duplicate pairs."""
    given = dict(locals())
    if nproc > 1 and not _in_workers():  # the launched workers run this command again, as torchrun's do
        return _launch_workers(nproc, train, given)
    command = {k: [str(p) for p in v] if isinstance(v, list) else str(v) if isinstance(v, Path) else v
               for k, v in given.items()}  # this run's options, kept in the checkpoint for --resume
    if resume is not None and data is None:
        return train(**_saved_train_options(resume), resume=resume, quiet=quiet, as_json=as_json)
    if not data or out is None:
        raise ConfigError("give --data FILE and --out DIR (or --resume CHECKPOINT to continue a run)")
    _check_out(out, overwrite)
    from .calibration import check_targets
    from .data import Pairs, split_pairs
    from .losses import LossConfig, build_loss
    from .model import ModelConfig
    from .training import TrainConfig
    from .training import train as run_training

    check_targets(target_precision, target_recall)  # before reading or training
    loss = loss or ("hinge" if answers else "triplet")
    loss_options = LossConfig(margin=margin, scale=scale)
    build_loss(loss, loss_options)  # a margin or scale this loss has not: refused before reading anything
    test = None
    if cross and (answers or encoder != "lstm" or head != "cosine" or loss != "triplet"):
        raise ConfigError("--cross trains a cross-encoder on labelled pairs: it takes --transformer, not --answers, "
                          "--encoder, --head or --loss")
    if answers:
        pairs, val, val_questions = _answer_triplets(data, val_data, val_fraction, negatives, seed)
    else:
        parts = [_read(p, format, text1, text2, label) for p in data]
        if weight:
            if len(weight) != len(parts):
                raise ConfigError(f"--weight given {len(weight)} times for {len(parts)} --data files; give one per file")
            parts = [part.with_weight(w) for part, w in zip(parts, weight)]
        pairs = Pairs.concat(parts)
        if test_fraction > 0:
            test, pairs = split_pairs(pairs, [test_fraction], seed=seed)
        if val_data is not None:
            val = _read(val_data, format, text1, text2, label)
        else:
            val, pairs = split_pairs(pairs, [val_fraction], seed=seed)
    if cross:
        return _train_cross(pairs, val, test, out=out, transformer=transformer, epochs=epochs, batch_size=batch_size,
                            lr=lr, seed=seed, precision=precision, threshold_metric=threshold_metric, calibrate=calibrate,
                            checkpoint=resume or checkpoint, resume=resume is not None, run={"cli": {**command, "resume": None}},
                            overwrite=overwrite, quiet=quiet, as_json=as_json)
    defaults = TrainConfig()
    config = TrainConfig(epochs=epochs or defaults.epochs, batch_size=batch_size or defaults.batch_size, lr=lr, loss_options=loss_options, seed=seed, warmup_steps=warmup_steps,
                         keep_initial=keep_initial, teacher=teacher,
                         precision=precision, threshold_metric=threshold_metric, workers=workers,
                         calibrate=calibrate, target_precision=target_precision, target_recall=target_recall,
                         device=device, gather=gather)
    options = _encoder_options(option, pooling=pooling, path=transformer,
                               frozen_layers=frozen_layers or None)
    model_config = ModelConfig(encoder=encoder, head=head, loss=loss, dim=dim, encoder_options=options,
                               glove=str(glove) if glove else None, seed=seed, lowercase=lowercase, max_vocab=max_vocab or None,
                               oov_buckets=oov_buckets, char_ngrams=_length_range(char_ngrams, "--char-ngrams"),
                               char_buckets=char_buckets)
    model = run_training(pairs, val, model_config=model_config, config=config, checkpoint=resume or checkpoint,
                         resume=resume is not None, run={"cli": {**command, "resume": None}}, progress=not quiet)
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
        from .answers import ranking_report

        result["validation_ranking"] = ranking_report(model.similarity, val_questions)
        r = result["validation_ranking"]
        lines.append(f"validation ranking ({r['questions']} questions): MAP {r['map']:.4f}, MRR {r['mrr']:.4f}")
    if "glove" in model.info:
        result["glove"] = model.info["glove"]
        lines.append(f"GloVe covers {result['glove']['covered']} of {result['glove']['total']} words ({100 * result['glove']['fraction']:.1f}%)")
    if test is not None:
        from .evaluation import evaluate as run_evaluation

        result["test"] = run_evaluation(model, test)
        t = result["test"]
        lines.append(f"held-out test split ({t['n']} pairs): accuracy {t['accuracy']:.4f}, F1 {t['f1']:.4f}, ROC-AUC {t['roc_auc']:.4f}")
    _emit(result, as_json, [
        f"trained on {result['train_pairs']} pairs for {result['epochs']} epochs in {result['seconds']:.1f}s "
        f"({result['pairs_per_second']:.0f} pairs/s); best epoch {result['best_epoch']}",
        f"threshold {result['threshold']:.4f} (chosen on {result['val_pairs']} validation pairs)",
        f"saved to {out}",
    ] + lines)


@app.command()
@user_errors
def evaluate(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Labelled pairs to evaluate on.")],
    threshold: Annotated[Optional[float], typer.Option(help="Decision threshold (default: the model's, chosen on validation data).")] = None,
    report: Annotated[Optional[Path], typer.Option("--report", help="Also write a self-contained HTML report: curves, histograms, reliability diagram, confusion matrix, most confident errors.")] = None,
    errors: Annotated[Optional[Path], typer.Option("--errors", help="Also write every misclassified pair to this CSV.")] = None,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Accuracy, precision, recall, F1, ROC-AUC, AP, calibration (Brier, ECE, log-loss) and the confusion matrix on labelled pairs."""
    from .evaluation import evaluate_pairs
    from .loading import load_model

    model = load_model(model_dir, device=device)
    ev = evaluate_pairs(model, _read(data, format, text1, text2, label), threshold=threshold)
    result = dict(ev.metrics)
    if report is not None:
        from .report import write_report

        write_report(report, ev, title=f"{model_dir.name} on {data.name}", model=str(model_dir), data=str(data))
        result["report"] = str(report)
    if errors is not None:
        from .report import write_errors

        result["errors"] = {"path": str(errors), "pairs": write_errors(errors, ev)}
    (tn, fp), (fn, tp) = result["confusion_matrix"]
    lines = [f"{k:>18}: {result[k]:.4f}" for k in ("accuracy", "precision", "recall", "f1", "roc_auc", "average_precision", "threshold",
                                                   "brier", "ece", "log_loss") if result[k] is not None]
    lines += [f"{k:>18}: {result[k]:.2f}" for k in ("spearman", "pearson") if k in result]
    lines += [f"{'pairs':>18}: {result['n']}", f"{'confusion matrix':>18}: [[tn={tn}, fp={fp}], [fn={fn}, tp={tp}]]"]
    if not result["calibrated"]:
        lines.append("(not calibrated: brier, ece and log_loss are of the similarity clipped to [0, 1])")
    if report is not None:
        lines.append(f"report written to {report}")
    if errors is not None:
        lines.append(f"{result['errors']['pairs']} misclassified pairs written to {errors}")
    _emit(result, as_json, lines)


@app.command()
@user_errors
def predict(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    text1: Annotated[Optional[str], typer.Argument(help="First text (or --text1).")] = None,
    text2: Annotated[Optional[str], typer.Argument(help="Second text (or --text2).")] = None,
    first: Annotated[Optional[str], typer.Option("--text1", help="First text.")] = None,
    second: Annotated[Optional[str], typer.Option("--text2", help="Second text.")] = None,
    threshold: Annotated[Optional[float], typer.Option(help="Decision threshold (default: the model's).")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Also weigh each word: how much it drove the similarity.")] = False,
    as_json: JsonOpt = False,
):
    """Similarity of two texts and whether they are duplicates."""
    from .loading import load_model

    text1, text2 = _one_of(text1, first, "text1"), _one_of(text2, second, "text2")
    model = load_model(model_dir)
    t = model.threshold if threshold is None else threshold
    similarity = float(model.similarity([text1], [text2])[0])
    # probability: null when the model is not calibrated (the key is always there)
    probability = float(model.calibrator([similarity])[0]) if model.calibrator is not None else None
    result = {"similarity": similarity, "probability": probability, "duplicate": similarity > t, "threshold": t}
    odds = f", probability {probability:.3f}" if probability is not None else ""
    lines = [f"similarity {similarity:.4f}{odds} → {'duplicate' if result['duplicate'] else 'not duplicate'} (threshold {t:.4f})"]
    if explain:
        explanation = result["explanation"] = model.explain(text1, text2).to_dict()
        for side in ("text1", "text2"):
            ranked = sorted(explanation[side], key=lambda w: -w["weight"])
            lines.append(f"{side} words by weight ({explanation['method']}): "
                         + ", ".join(f"{w['word']} {w['weight']:+.3f}" for w in ranked))
    _emit(result, as_json, lines)


def _one_of(argument: str | None, option: str | None, name: str) -> str:
    """A text given either as an argument or as --textN, not both."""
    if (argument is None) == (option is None):
        raise ConfigError(f"give {name} once: as an argument or as --{name}")
    return argument if option is None else option


@app.command()
@user_errors
def calibrate(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (its config.json is rewritten atomically; weights untouched).")],
    data: Annotated[Path, typer.Option("--data", help="Labelled pairs (both labels, 0/1) from the domain the model will score.")],
    method: Annotated[str, typer.Option(help="auto (the lower cross-validated log-loss), platt or isotonic.")] = "auto",
    target_precision: TargetPrecisionOpt = None,
    target_recall: TargetRecallOpt = None,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    as_json: JsonOpt = False,
):
    """Fit similarity -> duplicate probability (Platt or isotonic) on labelled pairs; optionally set the threshold for a target precision or recall."""
    from .calibration import calibrate as run_calibration
    from .calibration import check_targets
    from .loading import load_model

    check_targets(target_precision, target_recall)
    model = load_model(model_dir)
    summary = run_calibration(model, _read(data, format, text1, text2, label), method=method,
                              target_precision=target_precision, target_recall=target_recall)
    model.save_fitted(model_dir)
    cv = summary["cv_log_loss"]
    lines = [f"calibrated on {summary['pairs']} pairs of {data}: {summary['method']} "
             f"(cross-validated log-loss: platt {cv['platt']:.4f}, isotonic {cv['isotonic']:.4f})",
             f"ECE on these pairs: {summary['ece_before']:.4f} before, {summary['ece_after']:.4f} after"]
    choice = summary.get("threshold_choice")
    if choice:
        lines.append(f"threshold {summary['threshold']:.4f}: precision {choice['precision']:.4f}, recall {choice['recall']:.4f} "
                     f"(target {choice['metric']} {choice['target']})")
    else:
        lines.append(f"threshold unchanged: {summary['threshold']:.4f}")
    _emit({"model": str(model_dir), **summary}, as_json, lines + [f"saved to {model_dir / 'config.json'}"])


@app.command()
@user_errors
def score(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Pairs to score (CSV or TSV; labels optional, every column kept).")],
    out: Annotated[Path, typer.Option("--out", help="Scored copy to write (.csv or .tsv; written whole or not at all).")],
    batch_size: Annotated[int, typer.Option(min=1, help="Pairs read, scored and written at a time.")] = 1024,
    threshold: Annotated[Optional[float], typer.Option(help="Decision threshold (default: the model's).")] = None,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    as_json: JsonOpt = False,
):
    """Add similarity, probability (calibrated models) and duplicate columns to a file of pairs, streamed."""
    from .progress import tqdm

    from .loading import load_model
    from .scoring import score_file

    model = load_model(model_dir)
    bar = None
    if not quiet and sys.stderr.isatty():
        bar = tqdm(desc="score", unit="pair")

    def progress(pairs: int, line: int) -> None:
        if bar is not None:
            bar.update(pairs - bar.n)
        elif not quiet:  # not a terminal (a log file, CI): one plain line per chunk
            typer.echo(f"scored {pairs} pairs (to line {line})", err=True)

    try:
        summary = score_file(model, data, out, format=format, text1=text1, text2=text2, chunk_size=batch_size,
                             threshold=threshold, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    _emit(summary, as_json, [f"scored {summary['pairs']} pairs into {out} (threshold {summary['threshold']:.4f}"
                             f"{'' if summary['calibrated'] else '; not calibrated: no probability column'})"])


@app.command("pretrained")
@user_errors
def pretrained_model(
    source: Annotated[str, typer.Argument(help="minilm (all-MiniLM-L6-v2), mpnet (all-mpnet-base-v2; make mpnet), or a local sentence-transformers or Hugging Face model folder.")],
    out: Annotated[Path, typer.Option("--out", help="Model folder to write.")],
    val_data: Annotated[Optional[list[Path]], typer.Option("--val-data", help="Labelled pairs to choose the threshold on (repeat for several files). Default: the shared validation sets (msrp-val, sts-dev, sick-trial).")] = None,
    max_length: Annotated[Optional[int], typer.Option(min=1, help="Tokens kept per text (default: the folder's max_seq_length, else 128).")] = None,
    threshold_metric: Annotated[str, typer.Option(help="What the threshold maximises on the validation pairs: accuracy or f1.")] = "accuracy",
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Save a pretrained sentence encoder, untrained, as a Siamese model (cosine head, threshold chosen on validation pairs)."""
    _check_out(out, overwrite)
    from .datasets import validation_sets
    from .sentence_encoder import from_pretrained

    parts = [_read(p, format, text1, text2, label) for p in val_data] if val_data else validation_sets()
    model = from_pretrained(source, parts, max_length=max_length, metric=threshold_metric)
    model.save(out, overwrite=overwrite)
    info = model.info["pretrained"]
    choice = info["threshold_choice"]
    result = {"out": str(out), "source": source, "folder": info["folder"], "pooling": info["pooling"],
              "max_length": info["max_length"], "dim": info["dim"], "threshold": choice["threshold"],
              "threshold_metric": choice["metric"], "threshold_value": choice["value"],
              "val_pairs": choice["val_pairs"], "chosen_on": choice["chosen_on"]}
    _emit(result, as_json, [
        f"{source}: {info['pooling']} pooling, {info['dim']}-d, up to {info['max_length']} tokens per text",
        f"threshold {choice['threshold']:.4f} ({choice['metric']} {choice['value']:.4f} on {choice['val_pairs']} "
        f"validation pairs: {', '.join(choice['chosen_on'])})",
        f"saved to {out}",
    ])


@app.command()
@user_errors
def encode(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Texts: a .txt file (one per line; an empty line is an error) or a CSV/TSV column.")],
    out: Annotated[Path, typer.Option("--out", help="Vectors to write: a float32 .npy, one row per text in file order.")],
    column: Annotated[Optional[str], typer.Option("--column", help="CSV/TSV column holding the texts (default: the first).")] = None,
    batch_size: Annotated[Optional[int], typer.Option(min=1, help="Texts per batch (default: the encoder's).")] = None,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: JsonOpt = False,
):
    """Embed texts into a .npy file: unit vectors for cosine models, the encoder's raw features for the other heads."""
    from .data import read_texts
    from .model import SiameseModel
    from .vectors import check_target, encode_to_file

    check_target(out)
    model = SiameseModel.load(model_dir, device=device)
    texts = read_texts(data, column, skip_empty=False)  # row i of the output is text i: no silent skips
    runner = _corpus_engine(engine, address, device, quiet or as_json)
    result = encode_to_file(model, texts, out, batch_size=batch_size, progress=not quiet and not as_json, engine=runner)
    _emit(result, as_json, [f"encoded {result['n']} texts into {result['dim']}-d vectors in {result['seconds']:.2f}s "
                            f"({result['texts_per_second']} texts/s); written to {out}"]
          + ([] if model.config.head == "cosine" else [f"note: head {model.config.head!r}: raw encoder features, not unit vectors"]))


@app.command()
@user_errors
def summary(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    png: Annotated[Optional[Path], typer.Option("--png", help="Also draw the architecture into this PNG file.")] = None,
    as_json: JsonOpt = False,
):
    """Layers, output shapes and parameter counts of a model (like Keras's model.summary())."""
    from dataclasses import asdict

    from .model import SiameseModel
    from .summary import draw, summary_rows

    model = SiameseModel.load(model_dir)
    if png is not None:
        draw(model, png)
    rows = [asdict(r) for r in summary_rows(model)]
    total = sum(p.numel() for m in (model.encoder, model.head) for p in m.parameters())
    result = {"encoder": model.config.encoder, "head": model.config.head, "loss": model.config.loss,
              "layers": rows, "total_params": total, "png": str(png) if png else None}
    _emit(result, as_json, [model.summary()] + ([f"architecture drawn to {png}"] if png else []))


@app.command()
@user_errors
def rank(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    question: Annotated[str, typer.Argument(help="The question.")],
    candidates: Annotated[Path, typer.Option("--candidates", help="Candidate answers: a .txt file (one per line) or a CSV/TSV column.")],
    column: Annotated[Optional[str], typer.Option("--column", help="CSV/TSV column holding the answers (default: the first).")] = None,
    k: Annotated[Optional[int], typer.Option("-k", min=1, help="Show only the best k (default: all).")] = None,
    as_json: JsonOpt = False,
):
    """Rank candidate answers for a question, best first."""
    from .answers import rank as run_rank
    from .data import read_texts
    from .model import SiameseModel

    model = SiameseModel.load(model_dir)
    texts = read_texts(candidates, column)
    ranked = run_rank(model, question, texts)[:k]
    hits = [{"rank": r + 1, "score": score, "candidate": i + 1, "answer": texts[i]} for r, (i, score) in enumerate(ranked)]
    _emit({"question": question, "ranked": hits}, as_json,
          [f"{h['rank']:>3}. {h['score']:.4f}  {h['answer']}" for h in hits])


@app.command("evaluate-answers")
@user_errors
def evaluate_answers(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Answer-selection set: TrecQA CSV (qtext,label,atext) or a WikiQA folder.")],
    as_json: JsonOpt = False,
):
    """MAP and MRR of ranking each question's candidate answers."""
    from .answers import ranking_report, read_answers
    from .model import SiameseModel

    report = ranking_report(SiameseModel.load(model_dir).similarity, read_answers(data))
    _emit(report, as_json, [f"MAP {report['map']:.4f}, MRR {report['mrr']:.4f} over {report['questions']} questions "
                            f"({report['candidates']} candidates)"])


index_app = typer.Typer(no_args_is_help=True, help="Build and extend duplicate-search indexes.")
app.add_typer(index_app, name="index")
TextColumnOpt = Annotated[Optional[str], typer.Option("--column", help="CSV/TSV column holding the texts (default: the first).")]


@index_app.command("build")
@user_errors
def index_build(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Texts: a .txt file (one per line) or a CSV/TSV column.")],
    out: Annotated[Path, typer.Option("--out", help="Index folder to write.")],
    column: TextColumnOpt = None,
    kind: Annotated[str, typer.Option(help="flat (exact), hnsw or ivf (approximate, for large corpora), or ondisk (ivf with its lists on disk, memory-mapped: a corpus larger than memory).")] = "flat",
    shard_size: Annotated[int, typer.Option(min=1, help="--kind ondisk: vectors added to the lists per shard (what is in memory at a time).")] = 1_000_000,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Encode a corpus into a FAISS index saved with its texts (each distinct text once)."""
    _check_out(out, overwrite)
    from .data import read_texts
    from .model import SiameseModel
    from .search import DuplicateIndex

    model = SiameseModel.load(model_dir, device=device)
    index = DuplicateIndex(model, kind=kind)
    index.shard_size = shard_size
    texts = read_texts(data, column)
    index.add(texts, progress=not quiet, engine=_corpus_engine(engine, address, device, quiet or as_json))
    index.save(out, overwrite=overwrite)
    _emit({"out": str(out), "size": len(index), "skipped": len(texts) - len(index), "kind": kind}, as_json,
          [f"indexed {len(index)} texts ({kind}) into {out}; {len(texts) - len(index)} repeats skipped"])


def _open_index(index_dir: Path, model_dir: Path | None):
    """The index, with the given model folder or else the one recorded when it was built."""
    from .model import SiameseModel
    from .search import DuplicateIndex

    return DuplicateIndex.load(index_dir, SiameseModel.load(model_dir) if model_dir else None)


@index_app.command("add")
@user_errors
def index_add(
    index_dir: Annotated[Path, typer.Argument(help="Index folder to extend (rewritten atomically).")],
    data: Annotated[Path, typer.Option("--data", help="New texts: a .txt file or a CSV/TSV column.")],
    model_dir: Annotated[Optional[Path], typer.Option("--model", help="Model folder (default: the one that built the index).")] = None,
    column: TextColumnOpt = None,
    allow_duplicates: Annotated[bool, typer.Option(
        "--allow-duplicates", help="Also add texts already indexed (by exact text, whitespace collapsed).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Append texts to an index, encoding only the new ones; texts already indexed are skipped."""
    from .data import read_texts

    index = _open_index(index_dir, model_dir)
    texts = read_texts(data, column)
    added = index.add(texts, allow_duplicates=allow_duplicates, progress=not quiet)
    index.save(index_dir)
    _emit({"out": str(index_dir), "added": added, "skipped": len(texts) - added, "size": len(index)}, as_json,
          [f"added {added} texts ({len(texts) - added} already indexed, skipped); {index_dir} now holds {len(index)}"])


@app.command()
@user_errors
def search(
    index_dir: Annotated[Path, typer.Argument(help="Index folder.")],
    query: Annotated[str, typer.Argument(help="The new question.")],
    model_dir: Annotated[Optional[Path], typer.Option("--model", help="Model folder (default: the one that built the index).")] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="How many neighbours.")] = 5,
    threshold: Annotated[Optional[float], typer.Option(help="Duplicate threshold (default: the model's).")] = None,
    rerank: Annotated[Optional[Path], typer.Option("--rerank", help="A cross-encoder folder (train --cross) that re-scores the k candidates and gives the verdict.")] = None,
    as_json: JsonOpt = False,
):
    """Nearest indexed texts to a query, with similarity and a duplicate verdict."""
    from dataclasses import asdict

    cross = _open_cross(rerank) if rerank else None  # a wrong folder fails before the index is read
    index = _open_index(index_dir, model_dir)
    hits = index.search([query], k, threshold=None if cross else threshold)[0]
    if cross is not None:
        from .search.cascade import rerank as rerank_hits

        hits = rerank_hits(cross, [query], [hits], threshold=threshold)[0]
    _emit({"query": query, "hits": [asdict(h) for h in hits]}, as_json,
          [f"{h.similarity:.4f} {'DUP' if h.duplicate else '   '} [{h.id}] {h.text}" for h in hits])


def _open_cross(path: Path):
    """A cross-encoder folder, or one line saying what it is instead."""
    from .loading import load_model

    model = load_model(path)
    if getattr(model, "kind", None) != "cross":
        raise ConfigError(f"{path}: --rerank/--verify take a cross-encoder (siamese train --cross), not a bi-encoder")
    return model


@app.command()
@user_errors
def dedupe(
    path: Annotated[Path, typer.Argument(help="Model folder; with --rethreshold, a finished run's folder.")],
    data: Annotated[Optional[Path], typer.Option("--data", help="Texts: a .txt file or a CSV/TSV column.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run folder to write (results, candidate pairs, vectors).")] = None,
    against: Annotated[Optional[Path], typer.Option(
        "--against", help="Reference set (a .txt/CSV/TSV file or an index folder): flag the texts that duplicate it.")] = None,
    rethreshold: Annotated[Optional[float], typer.Option(
        "--rethreshold", help="Regroup the run folder PATH at this threshold (at or above its floor), without encoding.")] = None,
    threshold: Annotated[Optional[float], typer.Option(help="Duplicate threshold (default: the model's).")] = None,
    floor: Annotated[Optional[float], typer.Option(
        help="Keep candidate pairs down to this similarity for later --rethreshold (default: threshold - 0.05).")] = None,
    column: TextColumnOpt = None,
    id_column: Annotated[Optional[str], typer.Option("--id-column", help="CSV column of unique ids (default: row number).")] = None,
    against_column: Annotated[Optional[str], typer.Option(help="Text column of a CSV reference (default: --column).")] = None,
    against_id_column: Annotated[Optional[str], typer.Option(help="Id column of a CSV reference (default: --id-column).")] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Neighbours examined per text.")] = 20,
    kind: Annotated[str, typer.Option(
        help="auto (exact up to 50,000 texts, ivf beyond), flat (exact), ivf or hnsw (approximate).")] = "auto",
    clusters: Annotated[Optional[str], typer.Option(
        help="components (all texts linked by a chain of duplicates; the default) or communities (tight: each "
             "member a duplicate of its cluster's centre).")] = None,
    min_size: Annotated[Optional[int], typer.Option(min=2, help="Smallest cluster written (default 2).")] = None,
    verify: Annotated[Optional[Path], typer.Option("--verify", help="A cross-encoder folder (train --cross) that decides the candidate pairs near the threshold.")] = None,
    verify_band: Annotated[float, typer.Option(min=0.0, help="With --verify: pairs within this much of the threshold are verified.")] = 0.1,
    verify_all: Annotated[bool, typer.Option("--verify-all", help="With --verify: every candidate pair is verified, not only the band.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Also show the least similar pairs accepted as duplicates.")] = False,
    explain_count: Annotated[int, typer.Option(min=1, help="How many pairs --explain shows.")] = 10,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Group near-duplicate texts (or, with --against, flag the texts that duplicate a reference set);
    the run folder can be re-thresholded later without encoding."""
    from .search import DedupeRun

    if rethreshold is not None:
        run = DedupeRun.load(path)
        summary = run.rethreshold(rethreshold, clustering=clusters, min_size=min_size)
    else:
        if data is None or out is None:
            raise ConfigError("dedupe needs --data and --out (or --rethreshold T RUN_FOLDER)")
        extra = {}
        if verify is not None:
            if against is not None:
                raise ConfigError("--verify works on a dedupe within one corpus, not with --against")
            extra = {"verify": _open_cross(verify), "verify_band": None if verify_all else verify_band}
        run = _new_dedupe_run(path, data, out, against, **extra, threshold=threshold, floor=floor, column=column,
                              id_column=id_column, against_column=against_column, against_id_column=against_id_column,
                              k=k, kind=kind, clustering=clusters or "components", min_size=min_size or 2, quiet=quiet,
                              device=device, engine=_corpus_engine(engine, address, device, quiet or as_json))
        summary = run.summary()
    if "verified" in run.meta:
        summary["verified"] = run.meta["verified"]
    least = run.least_similar(explain_count) if explain else []
    if explain:
        summary["least_similar"] = [a.as_json() for a in least]
    if summary["mode"] == "self":
        lines = [f"{summary['pairs']} duplicate pairs in {summary['clusters']} clusters ({summary['clustered_texts']} "
                 f"of {summary['texts']} texts, {summary['exact_duplicates']} exact copies) at {summary['threshold']}; "
                 f"written to {summary['out']}"]
    else:
        lines = [f"{summary['flagged']} of {summary['texts']} texts duplicate the reference ({summary['exact_matches']} "
                 f"exactly) at {summary['threshold']}; written to {summary['out']}"]
    lines += [f"{a.similarity:.4f} [{a.first.id}] {a.first.text} ~ [{a.second.id}] {a.second.text}" for a in least]
    _emit(summary, as_json, lines)


def _new_dedupe_run(model_dir: Path, data: Path, out: Path, against: Path | None, *, column, id_column, against_column,
                    against_id_column, clustering: str, min_size: int, quiet: bool, device: str, **options):
    """Read the texts (and the reference), load the model and run the dedupe (``engine``: None or Ray)."""
    from .model import SiameseModel
    from .search import dedupe_against, read_records
    from .search import dedupe as self_dedupe

    records = read_records(data, column, id_column)
    sources = {"data": str(data), "column": column, "id_column": id_column}
    model = SiameseModel.load(model_dir, device=device)
    if against is None:
        return self_dedupe(model, records, out, clustering=clustering, min_size=min_size, progress=not quiet,
                           sources=sources, **options)
    if against.is_dir():
        from .search import DuplicateIndex

        reference = DuplicateIndex.load(against, model)
    else:
        reference = read_records(against, against_column or column,
                                 against_id_column if against_id_column is not None else id_column)
    return dedupe_against(model, records, reference, out, progress=not quiet,
                          sources={**sources, "against": str(against)}, **options)


@app.command()
@user_errors
def serve(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    index_dir: Annotated[Optional[Path], typer.Option("--index", help="Index folder for /search.")] = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: Annotated[Optional[list[str]], typer.Option("--api-key", help="Require this key (repeat for several; default: $SIAMESE_API_KEYS, comma-separated) as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'. The page and /health stay open.")] = None,
    batching: Annotated[bool, typer.Option("--batching/--no-batching", help="Encode concurrent requests' texts in one model call.")] = True,
    max_batch: Annotated[int, typer.Option(help="Texts per batched model call.")] = 128,
    batch_wait_ms: Annotated[float, typer.Option(help="How long a request waits for others to join its batch.")] = 2.0,
    max_queue: Annotated[int, typer.Option(help="Requests waiting for the model; more are answered 429.")] = 64,
    read_timeout: Annotated[float, typer.Option(min=0.1, help="Seconds for a request's headers, and again for its body (408).")] = 15.0,
    log_level: Annotated[str, typer.Option(help="critical, error, warning, info (one access line per request) or debug.")] = "info",
    device: DeviceOpt = "auto",
):
    """Serve the model over HTTP: /similarity, /search, /embed, /v1/embeddings, /health, /metrics, /docs."""
    from .loading import load_model
    from .search import DuplicateIndex
    from .serve import BatchConfig, Limits, api_keys, create_app, run

    if log_level.lower() not in ("critical", "error", "warning", "info", "debug"):
        raise ConfigError(f"--log-level must be critical, error, warning, info or debug, got {log_level!r}")
    config = BatchConfig(enabled=batching, max_batch=max_batch, wait_ms=batch_wait_ms, max_queue=max_queue)
    config.check()
    keys = api_keys(api_key)
    model = load_model(model_dir, device=device)  # a bi-encoder, or a cross-encoder (/similarity only)
    if index_dir and getattr(model, "kind", None) == "cross":
        raise ConfigError("a cross-encoder has no vectors to search an index with; serve it without --index")
    index = DuplicateIndex.load(index_dir, model) if index_dir else None
    app = create_app(model, index, Limits(read_timeout=read_timeout), batching=config, api_keys=keys)
    run(app, host=host, port=port, log_level=log_level.lower(), read_timeout=read_timeout,
        what=f"{model_dir}" + (f" + {index_dir}" if index_dir else "") + (" (API keys required)" if keys else ""))


@app.command("distill")
@user_errors
def distill_command(
    out: Annotated[Path, typer.Option("--out", help="Model folder to write (a bag-of-words model: every command takes it).")],
    teacher: Annotated[str, typer.Option(help="The model to imitate: minilm (all-MiniLM-L6-v2), mpnet (make mpnet), or a Siamese, sentence-transformers or Hugging Face folder.")] = "minilm",
    data: Annotated[Optional[list[Path]], typer.Option("--data", help="Corpus files (repeat): .txt one text per line, a CSV/TSV column (--column), or a pair file (both texts). Default: every text of the shared pair sets outside their test splits.")] = None,
    column: Annotated[Optional[str], typer.Option(help="The CSV/TSV column holding the corpus texts.")] = None,
    dim: Annotated[int, typer.Option(min=2, help="Student width (at most the teacher's).")] = StaticConfig.dim,
    vocabulary: Annotated[str, typer.Option(help="subwords (the teacher's WordPiece tokens + frequent corpus words) or words.")] = StaticConfig.vocabulary,
    extra_words: Annotated[int, typer.Option(min=0, help="subwords: corpus words added as tokens of their own.")] = StaticConfig.extra_words,
    epochs: Annotated[int, typer.Option(min=0, help="Passes over the corpus matching the teacher's vectors (0: the teacher's token vectors only, as model2vec).")] = StaticConfig.epochs,
    lr: Annotated[float, typer.Option(min=0.0, help="Adam learning rate for the token vectors and weights.")] = StaticConfig.lr,
    fine_tune: Annotated[Optional[list[Path]], typer.Option("--fine-tune", help="Labelled pairs to fine-tune the student on afterwards (repeat for several files).")] = None,
    fine_tune_loss: Annotated[str, typer.Option(help="Loss of the fine-tuning: mnr, cosent, contrastive, triplet, ...")] = "mnr",
    fine_tune_epochs: Annotated[int, typer.Option(min=1)] = 1,
    fine_tune_lr: Annotated[float, typer.Option(min=0.0)] = 1e-3,
    val_data: Annotated[Optional[list[Path]], typer.Option("--val-data", help="Labelled pairs to choose the threshold on (repeat). Default: the shared validation sets.")] = None,
    seed: Annotated[int, typer.Option()] = StaticConfig.seed,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Distil a teacher into a static student: token vectors pooled like the bag of words, ~100x faster than MiniLM."""
    from .data import Pairs
    from .datasets import validation_sets
    from .distill import distill, read_corpus

    _check_out(out, overwrite)
    config = StaticConfig(dim=dim, vocabulary=vocabulary, extra_words=extra_words, epochs=epochs, lr=lr, seed=seed)
    config.check()
    texts = read_corpus(data, column=column) if data else None
    val = [_read(p, "auto", None, None, None) for p in val_data] if val_data else validation_sets()
    tune = Pairs.concat([_read(p, "auto", None, None, None) for p in fine_tune]) if fine_tune else None
    student = distill(teacher, texts, config=config, val_pairs=val, fine_tune=tune, fine_tune_loss=fine_tune_loss,
                      fine_tune_epochs=fine_tune_epochs, fine_tune_lr=fine_tune_lr, progress=not as_json)
    student.save(out, overwrite=overwrite)
    info = student.info["distillation"]
    choice = info["threshold_choice"]
    result = {"out": str(out), "teacher": info["teacher"].get("source"), "corpus_texts": info["corpus_texts"],
              "tokens": info["tokens"], "dim": student.dim, "val_cosine": info["history"][-1]["val_cosine"],
              "best_val_cosine": max((h["val_cosine"] or 0) for h in info["history"]),
              "threshold": choice["threshold"], "seconds": info["seconds"],
              "fine_tuned": "fine_tune" in info}
    _emit(result, as_json, [
        f"student of {result['teacher']}: {info['tokens']:,} tokens x {student.dim}, learned on {info['corpus_texts']:,} texts "
        f"in {info['seconds']:.0f} s (held-out cosine to the teacher {result['best_val_cosine']:.3f})",
        f"threshold {choice['threshold']:.4f} (chosen on {choice['val_pairs']} validation pairs)",
        f"saved to {out}",
    ])


@app.command()
@user_errors
def export(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (a transformer with the cosine head).")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write: config.json, tokenizer.json, model.onnx (only if the export succeeds).")],
    format: Annotated[str, typer.Option("--format", help="onnx: the encoder runs in ONNX Runtime.")] = "onnx",
    quantize: Annotated[Optional[str], typer.Option(help="int8: dynamic int8 quantisation of the matmuls (faster, 4x smaller, vectors slightly off).")] = None,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Export a model for fast CPU inference; every command opens the exported folder like any model folder."""
    from .export import check_export_options, export_model
    from .model import SiameseModel

    check_export_options(format, quantize)  # before the model is loaded
    _check_out(out, overwrite)
    result = export_model(SiameseModel.load(model_dir), out, format=format, quantize=quantize, overwrite=overwrite)
    _emit(result, as_json, [f"exported {model_dir} to {out} ({format}{', ' + quantize if quantize else ''}, "
                            f"{result['bytes'] / 1e6:.1f} MB; cosine to the PyTorch model >= {result['min_cosine']:.4f})"])


@app.command()
def formats():
    """List the pair formats the readers understand."""
    from .data import FORMATS

    for fmt in FORMATS.values():
        typer.echo(f"{fmt.name:<12} {fmt.description}")


# `siamese emoji ...`: the commands are in siamese/emoji/cli.py and attach themselves to this
# sub-app (importing that module in either order works: it only needs what is defined above).
emoji_app = typer.Typer(no_args_is_help=True, help="Emoji VAE and text→emoji Siamese model.")
app.add_typer(emoji_app, name="emoji")
from .emoji import cli as _emoji_commands  # noqa: E402,F401


def main() -> None:  # pragma: no cover - console entry point
    sys.exit(app())
