"""The ``siamese`` command: parse options, call the Python API, format the result."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .distill.static import StaticConfig
from .errors import ConfigError, SiameseError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Siamese neural networks for semantic similarity.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FormatOpt = Annotated[str, typer.Option("--format", help="Data format: auto, quora, generic, msrp, paws, twitter-url, sick, sts, semeval, mqp.")]
Text1Opt = Annotated[Optional[str], typer.Option("--text1", help="Column holding the first text.")]
Text2Opt = Annotated[Optional[str], typer.Option("--text2", help="Column holding the second text.")]
LabelOpt = Annotated[Optional[str], typer.Option("--label", help="Column holding the 0/1 label.")]
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

    return wrapper


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


def _emit(result: dict, as_json: bool, lines: list[str]) -> None:
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))  # emojis and texts stay readable characters
    else:
        typer.echo("\n".join(lines))


@app.command()
@user_errors
def train(
    data: Annotated[list[Path], typer.Option("--data", help="Labelled pairs to train on (repeat for several files).")],
    out: Annotated[Path, typer.Option("--out", help="Model folder to write (only written if training succeeds).")],
    weight: Annotated[Optional[list[float]], typer.Option("--weight", min=0.0, help="Sampling weight per --data file, in the same order (default 1 each): 2 draws a set twice per epoch, 0.5 half of it.")] = None,
    encoder: Annotated[str, typer.Option(help="lstm, bilstm, bilstm-max, cnn, bow (weighted bag of words; -o ngrams=2 adds word pairs) or transformer.")] = "lstm",
    head: Annotated[str, typer.Option(help="cosine, manhattan, l1, concat or symmetric.")] = "cosine",
    loss: Annotated[Optional[str], typer.Option(help="triplet (default), hinge (default with --answers), mnr; contrastive, cosent or bce (labelled pairs); distill (any pairs, with --teacher).")] = None,
    teacher: Annotated[Optional[str], typer.Option(help="With --loss distill: the model to imitate: a Siamese or Hugging Face model folder, or a name: mpnet (all-mpnet-base-v2; make mpnet), minilm.")] = None,
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
    epochs: Annotated[int, typer.Option(min=1)] = 5,
    batch_size: Annotated[int, typer.Option(min=2)] = 256,
    lr: Annotated[Optional[float], typer.Option(min=0.0, help="Adam learning rate (default: 0.01 lstm and bow, 1e-3 other word encoders, 2e-6 transformer).")] = None,
    dim: Annotated[Optional[int], typer.Option(min=1, help="LSTM width; embedding width of the other word encoders.")] = None,
    warmup_steps: Annotated[int, typer.Option(min=0, help="Raise the learning rate linearly over the first N steps (for fine-tuning a transformer).")] = 0,
    keep_initial: Annotated[float, typer.Option(min=0.0, max=0.99, help="Transformer: after training, mix this share of the pretrained weights back in (WiSE-FT), e.g. 0.5.")] = 0.0,
    margin: Annotated[Optional[float], typer.Option(help="Loss margin (default: 0.25 triplet, 0.2 hinge, 0.5 contrastive).")] = None,
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
    checkpoint: Annotated[Optional[Path], typer.Option(help="Also write the best weights here after each improving epoch.")] = None,
    workers: Annotated[Optional[int], typer.Option(min=1, help="Threads encoding parts of each batch in parallel (default: one per core).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    as_json: JsonOpt = False,
):
    """Train a Siamese model: by default the LSTM with the hard-negative triplet loss on duplicate pairs."""
    from .calibration import check_targets
    from .data import Pairs, split_pairs
    from .model import ModelConfig
    from .training import TrainConfig
    from .training import train as run_training

    check_targets(target_precision, target_recall)  # before reading or training
    loss = loss or ("hinge" if answers else "triplet")
    test = None
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
    config = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, margin=margin, seed=seed, warmup_steps=warmup_steps,
                         keep_initial=keep_initial, teacher=teacher,
                         precision=precision, threshold_metric=threshold_metric, workers=workers,
                         calibrate=calibrate, target_precision=target_precision, target_recall=target_recall)
    options = _encoder_options(option, pooling=pooling, path=transformer,
                               frozen_layers=frozen_layers or None)
    model_config = ModelConfig(encoder=encoder, head=head, loss=loss, dim=dim, encoder_options=options,
                               glove=str(glove) if glove else None, seed=seed, lowercase=lowercase, max_vocab=max_vocab or None,
                               oov_buckets=oov_buckets, char_ngrams=_length_range(char_ngrams, "--char-ngrams"),
                               char_buckets=char_buckets)
    model = run_training(pairs, val, model_config=model_config, config=config, checkpoint=checkpoint, progress=not quiet)
    model.save(out)
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
    as_json: JsonOpt = False,
):
    """Accuracy, precision, recall, F1, ROC-AUC, AP, calibration (Brier, ECE, log-loss) and the confusion matrix on labelled pairs."""
    from .evaluation import evaluate_pairs
    from .model import SiameseModel

    model = SiameseModel.load(model_dir)
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
    text1: Annotated[str, typer.Argument(help="First text.")],
    text2: Annotated[str, typer.Argument(help="Second text.")],
    threshold: Annotated[Optional[float], typer.Option(help="Decision threshold (default: the model's).")] = None,
    as_json: JsonOpt = False,
):
    """Similarity of two texts and whether they are duplicates."""
    from .model import SiameseModel

    model = SiameseModel.load(model_dir)
    t = model.threshold if threshold is None else threshold
    similarity = float(model.similarity([text1], [text2])[0])
    # probability: null when the model is not calibrated (the key is always there)
    probability = float(model.calibrator([similarity])[0]) if model.calibrator is not None else None
    result = {"similarity": similarity, "probability": probability, "duplicate": similarity > t, "threshold": t}
    odds = f", probability {probability:.3f}" if probability is not None else ""
    _emit(result, as_json, [f"similarity {similarity:.4f}{odds} → {'duplicate' if result['duplicate'] else 'not duplicate'} (threshold {t:.4f})"])


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
    from .model import SiameseModel

    check_targets(target_precision, target_recall)
    model = SiameseModel.load(model_dir)
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
    from tqdm.auto import tqdm

    from .model import SiameseModel
    from .scoring import score_file

    model = SiameseModel.load(model_dir)
    bar = None
    if not quiet and sys.stderr.isatty():
        bar = tqdm(desc="score", unit="pair", file=sys.stderr)

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
    as_json: JsonOpt = False,
):
    """Save a pretrained sentence encoder, untrained, as a Siamese model (cosine head, threshold chosen on validation pairs)."""
    from .datasets import validation_sets
    from .sentence_encoder import from_pretrained

    parts = [_read(p, format, text1, text2, label) for p in val_data] if val_data else validation_sets()
    model = from_pretrained(source, parts, max_length=max_length, metric=threshold_metric)
    model.save(out)
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: JsonOpt = False,
):
    """Embed texts into a .npy file: unit vectors for cosine models, the encoder's raw features for the other heads."""
    from .data import read_texts
    from .model import SiameseModel
    from .vectors import check_target, encode_to_file

    check_target(out)
    model = SiameseModel.load(model_dir)
    texts = read_texts(data, column, skip_empty=False)  # row i of the output is text i: no silent skips
    result = encode_to_file(model, texts, out, batch_size=batch_size, progress=not quiet and not as_json)
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
    kind: Annotated[str, typer.Option(help="flat (exact), hnsw or ivf (approximate, for large corpora).")] = "flat",
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Encode a corpus into a FAISS index saved with its texts."""
    from .data import read_texts
    from .model import SiameseModel
    from .search import DuplicateIndex

    model = SiameseModel.load(model_dir)
    index = DuplicateIndex(model, kind=kind)
    index.add(read_texts(data, column), progress=not quiet)
    index.save(out)
    _emit({"out": str(out), "size": len(index), "kind": kind}, as_json, [f"indexed {len(index)} texts ({kind}) into {out}"])


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
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Append texts to an index, encoding only the new ones."""
    from .data import read_texts

    index = _open_index(index_dir, model_dir)
    before = len(index)
    index.add(read_texts(data, column), progress=not quiet)
    index.save(index_dir)
    _emit({"out": str(index_dir), "added": len(index) - before, "size": len(index)}, as_json,
          [f"added {len(index) - before} texts; {index_dir} now holds {len(index)}"])


@app.command()
@user_errors
def search(
    index_dir: Annotated[Path, typer.Argument(help="Index folder.")],
    query: Annotated[str, typer.Argument(help="The new question.")],
    model_dir: Annotated[Optional[Path], typer.Option("--model", help="Model folder (default: the one that built the index).")] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="How many neighbours.")] = 5,
    threshold: Annotated[Optional[float], typer.Option(help="Duplicate threshold (default: the model's).")] = None,
    as_json: JsonOpt = False,
):
    """Nearest indexed texts to a query, with similarity and a duplicate verdict."""
    from dataclasses import asdict

    index = _open_index(index_dir, model_dir)
    hits = index.search([query], k, threshold=threshold)[0]
    _emit({"query": query, "hits": [asdict(h) for h in hits]}, as_json,
          [f"{h.similarity:.4f} {'DUP' if h.duplicate else '   '} [{h.id}] {h.text}" for h in hits])


@app.command()
@user_errors
def dedupe(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Texts: a .txt file or a CSV/TSV column.")],
    out: Annotated[Path, typer.Option("--out", help="Clusters as JSON lines.")],
    threshold: Annotated[Optional[float], typer.Option(help="Duplicate threshold (default: the model's).")] = None,
    column: TextColumnOpt = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Neighbours examined per text.")] = 20,
    kind: Annotated[str, typer.Option(
        help="auto (exact up to 50,000 texts, ivf beyond), flat (exact), ivf or hnsw (approximate).")] = "auto",
    clusters: Annotated[str, typer.Option(
        help="components (all texts linked by a chain of duplicates) or communities (tight: each member "
             "a duplicate of its cluster's centre).")] = "components",
    min_size: Annotated[int, typer.Option(min=2, help="Smallest cluster written.")] = 2,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Group near-duplicate texts into clusters of duplicates above the threshold."""
    from .data import read_texts
    from .model import SiameseModel
    from .search import dedupe as run_dedupe

    summary = run_dedupe(SiameseModel.load(model_dir), read_texts(data, column), out, threshold=threshold, k=k,
                         kind=kind, clustering=clusters, min_size=min_size, progress=not quiet)
    _emit(summary, as_json, [f"{summary['pairs']} duplicate pairs in {summary['clusters']} clusters "
                             f"({summary['clustered_texts']} of {summary['texts']} texts); written to {out}"])


@app.command()
@user_errors
def serve(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    index_dir: Annotated[Optional[Path], typer.Option("--index", help="Index folder for /search.")] = None,
    host: str = "127.0.0.1",
    port: int = 8000,
):
    """Serve the model over HTTP: /similarity, /search, /embed, /v1/embeddings, /health, /docs."""
    import uvicorn

    from .model import SiameseModel
    from .search import DuplicateIndex
    from .serve import create_app

    model = SiameseModel.load(model_dir)
    index = DuplicateIndex.load(index_dir, model) if index_dir else None
    uvicorn.run(create_app(model, index), host=host, port=port, log_level="warning")


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
    as_json: JsonOpt = False,
):
    """Distil a teacher into a static student: token vectors pooled like the bag of words, ~100x faster than MiniLM."""
    from .data import Pairs
    from .datasets import validation_sets
    from .distill import distill, read_corpus

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: a file is there, not a folder")
    config = StaticConfig(dim=dim, vocabulary=vocabulary, extra_words=extra_words, epochs=epochs, lr=lr, seed=seed)
    config.check()
    texts = read_corpus(data, column=column) if data else None
    val = [_read(p, "auto", None, None, None) for p in val_data] if val_data else validation_sets()
    tune = Pairs.concat([_read(p, "auto", None, None, None) for p in fine_tune]) if fine_tune else None
    student = distill(teacher, texts, config=config, val_pairs=val, fine_tune=tune, fine_tune_loss=fine_tune_loss,
                      fine_tune_epochs=fine_tune_epochs, fine_tune_lr=fine_tune_lr, progress=not as_json)
    student.save(out)
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
    as_json: JsonOpt = False,
):
    """Export a model for fast CPU inference; every command opens the exported folder like any model folder."""
    from .export import check_export_options, export_model
    from .model import SiameseModel

    check_export_options(format, quantize)  # before the model is loaded
    result = export_model(SiameseModel.load(model_dir), out, format=format, quantize=quantize)
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
