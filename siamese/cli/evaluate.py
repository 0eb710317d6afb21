"""``siamese evaluate``, ``predict``, ``calibrate``, ``score``, ``summary``, ``rank`` and
``evaluate-answers``: commands that read a model folder and report on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import ConfigError
from .common import (
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    LabelOpt,
    OverwriteFileOpt,
    TargetPrecisionOpt,
    TargetRecallOpt,
    Text1Opt,
    Text2Opt,
    VerifyAllOpt,
    VerifyBandOpt,
    VerifyOpt,
    check_out_file,
    emit,
    labelled_band_of,
    read_pair_file,
    text_argument,
    threshold_option,
    user_errors,
)
from .common import verify_band as verify_band_choice


@user_errors
def evaluate(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Labelled pairs to evaluate on.")],
    threshold: Annotated[
        Optional[float],
        typer.Option(
            callback=threshold_option, help="Decision threshold (default: the model's, chosen on validation data)."
        ),
    ] = None,
    report: Annotated[
        Optional[Path],
        typer.Option(
            "--report",
            help=(
                "Also write a self-contained HTML report: curves, histograms, reliability diagram, confusion "
                "matrix, most confident errors."
            ),
        ),
    ] = None,
    errors: Annotated[
        Optional[Path], typer.Option("--errors", help="Also write every misclassified pair to this CSV.")
    ] = None,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    device: DeviceOpt = "auto",
    overwrite: OverwriteFileOpt = False,
    as_json: JsonOpt = False,
):
    """Accuracy, precision, recall, F1, ROC-AUC, AP, calibration (Brier, ECE, log-loss), confusion matrix."""
    from ..evaluation.metrics import evaluate as evaluate_model
    from ..models.loading import load_model

    if report is not None and errors is not None and report.absolute() == errors.absolute():
        raise ConfigError(f"--report and --errors are both {report}: give each its own file")
    for out in (report, errors):  # before the evaluation, not after it
        check_out_file(out, overwrite, inputs=[data, model_dir])

    model = load_model(model_dir, device=device)
    pairs = read_pair_file(data, format, text1, text2, label)
    result = evaluate_model(model, pairs, threshold=threshold, report=report, errors=errors)
    (tn, fp), (fn, tp) = result["confusion_matrix"]
    lines = [
        f"{k:>18}: {result[k]:.4f}"
        for k in (
            "accuracy",
            "precision",
            "recall",
            "f1",
            "roc_auc",
            "average_precision",
            "threshold",
            "brier",
            "ece",
            "log_loss",
        )
        if result[k] is not None
    ]
    lines += [f"{k:>18}: {result[k]:.2f}" for k in ("spearman", "pearson") if k in result]
    lines += [f"{'pairs':>18}: {result['n']}", f"{'confusion matrix':>18}: [[tn={tn}, fp={fp}], [fn={fn}, tp={tp}]]"]
    if not result["calibrated"]:
        lines.append("(not calibrated: brier, ece and log_loss are of the similarity clipped to [0, 1])")
    if report is not None:
        lines.append(f"report written to {report}")
    if errors is not None:
        lines.append(f"{result['errors']['pairs']} misclassified pairs written to {errors}")
    emit(result, as_json, lines)


@user_errors
def predict(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    text1: Annotated[Optional[str], typer.Argument(help="First text (or --text1).")] = None,
    text2: Annotated[Optional[str], typer.Argument(help="Second text (or --text2).")] = None,
    first: Annotated[Optional[str], typer.Option("--text1", help="First text.")] = None,
    second: Annotated[Optional[str], typer.Option("--text2", help="Second text.")] = None,
    threshold: Annotated[
        Optional[float], typer.Option(callback=threshold_option, help="Decision threshold (default: the model's).")
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Also weigh each word: how much it drove the similarity.")
    ] = False,
    verify: VerifyOpt = None,
    verify_band: VerifyBandOpt = None,
    verify_all: VerifyAllOpt = False,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Similarity of two texts and whether they are duplicates (with --verify, as a stronger model decides
    where this one is unsure)."""
    from ..models.loading import load_model, load_verifier

    text1 = text_argument(_one_of(text1, first, "text1"), "text1")
    text2 = text_argument(_one_of(text2, second, "text2"), "text2")
    band = verify_band_choice(verify, verify_band, verify_all, sample=False)
    verifier = load_verifier(verify, device=device) if verify is not None else None
    model = load_model(model_dir, device=device)
    t = model.threshold if threshold is None else threshold
    band = labelled_band_of(band, model, verifier, t)
    similarity = float(model.similarity_pairwise([text1], [text2])[0])
    # probability: null when the model is not calibrated (the key is always there)
    probability = float(model.calibrator([similarity])[0]) if model.calibrator is not None else None
    result = {"similarity": similarity, "probability": probability, "duplicate": similarity > t, "threshold": t}
    odds = f", probability {probability:.3f}" if probability is not None else ""
    lines = [
        f"similarity {similarity:.4f}{odds} → {'duplicate' if result['duplicate'] else 'not duplicate'} (threshold "
        f"{t:.4f})"
    ]
    if verifier is not None:
        lines = _verified_pair(model, verifier, text1, text2, result, band, lines)
    if explain:
        explanation = result["explanation"] = model.explain(text1, text2, similarity=similarity).to_dict()
        for side in ("text1", "text2"):
            ranked = sorted(explanation[side], key=lambda w: -w["weight"])
            lines.append(
                f"{side} words by weight ({explanation['method']}): "
                + ", ".join(f"{w['word']} {w['weight']:+.3f}" for w in ranked)
            )
    emit(result, as_json, lines)


def _verified_pair(model, verifier, text1: str, text2: str, result: dict, band, lines: list[str]) -> list[str]:
    """predict's result and lines with the verifier's say: ``duplicate`` becomes the cascade's
    verdict, beside the first stage's own, whether the pair was verified and the verifier's score."""
    import math

    from ..decision.cascade import verify_pairs

    done = verify_pairs(
        model, verifier, [text1], [text2], threshold=result["threshold"], band=band, similarity=[result["similarity"]]
    )
    score = float(done.verifier_score[0])
    result["first_stage_duplicate"] = result["duplicate"]
    result.update(
        duplicate=bool(done.duplicate[0]),
        verified=bool(done.verified[0]),
        verifier_score=None if math.isnan(score) else score,
        verify=done.info,
    )
    verdict = "duplicate" if result["duplicate"] else "not duplicate"
    if result["verified"]:
        said = (
            f"verified by {done.info['model']}: score {score:.4f} → {verdict} "
            f"(its threshold {done.verifier_threshold:.4f})"
        )
    else:
        said = f"not verified (outside the band {_span(done.band)}): {verdict}"
    return lines + [said]


def _span(band) -> str:
    """A band's range as a reader sees it."""
    # no similarity or probability is above 1: a band reaching past it is every pair from its lower edge
    return f"{band.lo:.4f} to {band.hi:.4f}" if band.hi is not None and band.hi < 1 else f"from {band.lo:.4f} up"


def _one_of(argument: str | None, option: str | None, name: str) -> str:
    """A text given either as an argument or as --textN, not both."""
    if (argument is None) == (option is None):
        raise ConfigError(f"give {name} once: as an argument or as --{name}")
    return argument if option is None else option


@user_errors
def calibrate(
    model_dir: Annotated[
        Path, typer.Argument(help="Model folder (its config.json is rewritten atomically; weights untouched).")
    ],
    data: Annotated[
        Path, typer.Option("--data", help="Labelled pairs (both labels, 0/1) from the domain the model will score.")
    ],
    method: Annotated[
        str, typer.Option(help="auto (the lowest cross-validated log-loss), platt, isotonic or blend (their mean).")
    ] = "auto",
    target_precision: TargetPrecisionOpt = None,
    target_recall: TargetRecallOpt = None,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Fit similarity -> duplicate probability (Platt, isotonic or their blend) on labelled pairs.

    Optionally set the threshold for a target precision or recall."""
    from ..decision.calibration import calibrate as run_calibration
    from ..decision.calibration import check_targets
    from ..models.loading import load_model

    check_targets(target_precision, target_recall)
    model = load_model(model_dir, device=device)
    summary = run_calibration(
        model,
        read_pair_file(data, format, text1, text2, label),
        method=method,
        target_precision=target_precision,
        target_recall=target_recall,
    )
    model.save_fitted(model_dir)
    cv = summary["cv_log_loss"]
    lines = [
        f"calibrated on {summary['pairs']} pairs of {data}: {summary['method']} "
        f"(cross-validated log-loss: {', '.join(f'{m} {v:.4f}' for m, v in cv.items())})",
        f"ECE on these pairs: {summary['ece_before']:.4f} before, {summary['ece_after']:.4f} after",
    ]
    choice = summary.get("threshold_choice")
    if choice:
        lines.append(
            f"threshold {summary['threshold']:.4f}: precision {choice['precision']:.4f}, recall {choice['recall']:.4f} "
            f"(target {choice['metric']} {choice['target']})"
        )
    else:
        lines.append(f"threshold unchanged: {summary['threshold']:.4f}")
    emit({"model": str(model_dir), **summary}, as_json, lines + [f"saved to {model_dir / 'config.json'}"])


@user_errors
def score(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[
        Path, typer.Option("--data", help="Pairs to score (CSV or TSV; labels optional, every column kept).")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Scored copy to write (.csv or .tsv; written whole or not at all).")
    ],
    batch_size: Annotated[int, typer.Option(min=1, help="Pairs read, scored and written at a time.")] = 1024,
    threshold: Annotated[
        Optional[float], typer.Option(callback=threshold_option, help="Decision threshold (default: the model's).")
    ] = None,
    verify: VerifyOpt = None,
    verify_band: VerifyBandOpt = None,
    verify_all: VerifyAllOpt = False,
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    overwrite: OverwriteFileOpt = False,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Add similarity, probability (calibrated models) and duplicate columns to a file of pairs, streamed.

    With --verify, the duplicate column is the cascade's verdict, and verified and verifier_score columns are
    added; a file with labels is also scored: the cascade's metrics beside the model's alone."""
    from ..data.input_files import count_lines
    from ..evaluation.scoring import score_file
    from ..io.progress import tqdm
    from ..models.loading import load_model, load_verifier

    band = verify_band_choice(verify, verify_band, verify_all, sample=True)
    labelled = [band] if isinstance(band, Path) else []
    check_out_file(out, overwrite, inputs=[data, model_dir] + ([verify] if verify is not None else []) + labelled)
    verifier = load_verifier(verify, device=device) if verify is not None else None
    model = load_model(model_dir, device=device)
    band = labelled_band_of(band, model, verifier, threshold)
    # about one pair a line after the header (a quoted field may hold line breaks: then fewer)
    bar = None if quiet else tqdm(desc="score", unit="pair", total=max(count_lines(data) - 1, 1))

    def progress(pairs: int, line: int) -> None:
        if bar is not None:
            bar.update(pairs - bar.n)

    try:
        summary = score_file(
            model,
            data,
            out,
            format=format,
            text1=text1,
            text2=text2,
            chunk_size=batch_size,
            threshold=threshold,
            progress=progress,
            **({} if verifier is None else {"verify": verifier, "verify_band": band}),
        )
    finally:
        if bar is not None:
            bar.close()
    lines = [
        f"scored {summary['pairs']} pairs into {out} (threshold {summary['threshold']:.4f}"
        f"{'' if summary['calibrated'] else '; not calibrated: no probability column'})"
    ]
    if verifier is not None:
        lines += _cascade_lines(summary)
    emit(summary, as_json, lines)


def _cascade_lines(summary: dict) -> list[str]:
    """What score --verify adds to its report: the verifier's work and, with labels, both sets of metrics."""
    from ..decision.cascade import Band

    info, found = summary["verify"], summary["duplicates"]
    band = info["band"]
    if band["lo"] is None:
        where = "every pair"
    else:
        where = f"similarity {_span(Band(band['lo'], band['hi']))}"
    lines = [
        f"verified {info['verified']} of {summary['pairs']} pairs with {info['model']} ({where}) in "
        f"{info['seconds']:.1f} s; {info['changed']} verdicts changed; duplicates: {found['cascade']} "
        f"(first stage alone: {found['first_stage']})"
    ]
    if "metrics" in summary:
        lines.append(f"{'':>12} {'accuracy':>9} {'precision':>9} {'recall':>9} {'f1':>9}")
        for name, m in (("cascade", summary["metrics"]["cascade"]), ("first stage", summary["metrics"]["first_stage"])):
            lines.append(f"{name:>12} {m['accuracy']:9.4f} {m['precision']:9.4f} {m['recall']:9.4f} {m['f1']:9.4f}")
    return lines


@user_errors
def rank(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    question: Annotated[str, typer.Argument(help="The question.")],
    candidates: Annotated[
        Path, typer.Option("--candidates", help="Candidate answers: a .txt file (one per line) or a CSV/TSV column.")
    ],
    column: Annotated[
        Optional[str],
        typer.Option(
            "--column", help="CSV/TSV column holding the answers (default: the one named like text, answer...)."
        ),
    ] = None,
    k: Annotated[Optional[int], typer.Option("-k", min=1, help="Show only the best k (default: all).")] = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Rank candidate answers for a question, best first."""
    from ..data.answers import rank as run_rank
    from ..data.pairs import read_texts
    from ..models.siamese import SiameseModel

    question = text_argument(question, "question")
    model = SiameseModel.load(model_dir, device=device)
    texts = read_texts(candidates, column)
    ranked = run_rank(model, question, texts)[:k]
    hits = [
        {"rank": r + 1, "score": score, "candidate": i + 1, "answer": texts[i]} for r, (i, score) in enumerate(ranked)
    ]
    emit(
        {"question": question, "ranked": hits},
        as_json,
        [f"{h['rank']:>3}. {h['score']:.4f}  {h['answer']}" for h in hits],
    )


@user_errors
def evaluate_answers(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[
        Path, typer.Option("--data", help="Answer-selection set: TrecQA CSV (qtext,label,atext) or a WikiQA folder.")
    ],
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """MAP and MRR of ranking each question's candidate answers."""
    from ..data.answers import ranking_report, read_answers
    from ..models.siamese import SiameseModel

    report = ranking_report(SiameseModel.load(model_dir, device=device).similarity_pairwise, read_answers(data))
    emit(
        report,
        as_json,
        [
            f"MAP {report['map']:.4f}, MRR {report['mrr']:.4f} over {report['questions']} questions "
            f"({report['candidates']} candidates)"
        ],
    )
