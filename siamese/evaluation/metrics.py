"""Metrics for pair classification and graded similarity (the threshold choice itself is in
siamese.decision.threshold, re-exported here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn import metrics

from ..data.pairs import PairsLike, as_pairs
from ..decision.calibration import calibration_metrics, probabilities_or_clipped
from ..decision.threshold import check_threshold, choose_threshold, threshold_for_target  # noqa: F401 (threshold_for_target: re-exported)
from ..errors import ConfigError
from .result import Evaluation  # noqa: F401 (re-exported: where it was defined)

if TYPE_CHECKING:
    from ..models.siamese import SiameseModel


def classification_report(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict:
    """Accuracy, precision, recall, F1 at ``threshold``; ROC-AUC and AP over all thresholds."""
    labels = np.asarray(labels).astype(int)
    predicted = (np.asarray(scores) > threshold).astype(int)
    both = len(np.unique(labels)) == 2
    return {
        "n": int(len(labels)),
        "threshold": float(threshold),
        "accuracy": float(metrics.accuracy_score(labels, predicted)),
        "precision": float(metrics.precision_score(labels, predicted, zero_division=0)),
        "recall": float(metrics.recall_score(labels, predicted, zero_division=0)),
        "f1": float(metrics.f1_score(labels, predicted, zero_division=0)),
        "roc_auc": float(metrics.roc_auc_score(labels, scores)) if both else None,
        "average_precision": float(metrics.average_precision_score(labels, scores)) if both else None,
        "confusion_matrix": metrics.confusion_matrix(labels, predicted, labels=[0, 1]).tolist(),
    }


def correlation_report(scores: np.ndarray, gold: np.ndarray) -> dict:
    """Spearman and Pearson correlation (×100, as STS papers report them) with graded gold scores."""
    return {
        "spearman": float(spearmanr(scores, gold).statistic * 100),
        "pearson": float(pearsonr(scores, gold).statistic * 100),
    }


def evaluate_pairs(model: SiameseModel, pairs: PairsLike, *, threshold: float | None = None) -> Evaluation:
    """Score every pair; classification metrics at the threshold (default: the model's), calibration
    metrics (``brier``, ``ece``, ``log_loss``: of the calibrated probability, or of the raw score
    clipped to [0, 1] when the model is not calibrated; ``calibrated`` says which), and correlations
    when the pairs carry graded scores."""
    pairs = as_pairs(pairs)
    threshold = model.threshold if threshold is None else check_threshold(threshold)
    scores = np.asarray(model.similarity_pairwise(pairs.text1, pairs.text2))
    report = classification_report(scores, pairs.labels, threshold)
    report.update(calibration_metrics(probabilities_or_clipped(scores, model.calibrator), pairs.labels))
    report["calibrated"] = model.calibrator is not None
    if pairs.scores is not None:
        report.update(correlation_report(scores, pairs.scores))
    probabilities = model.calibrator(scores) if model.calibrator is not None else None
    return Evaluation(pairs, scores, probabilities, float(threshold), report)


def evaluate(
    model: SiameseModel,
    pairs: PairsLike,
    *,
    threshold: float | None = None,
    report: str | os.PathLike | None = None,
    errors: str | os.PathLike | None = None,
) -> dict:
    """The metrics of :func:`evaluate_pairs`. ``report``: also write a self-contained HTML report there (curves,
    histograms, reliability diagram, confusion matrix, most confident errors); ``errors``: every misclassified
    pair as CSV; each written atomically, its path (and the errors' count) in the result, as ``siamese evaluate
    --report/--errors`` writes them."""
    if report is not None and errors is not None and Path(report).absolute() == Path(errors).absolute():
        raise ConfigError(f"report and errors are both {report}: give each its own file")
    ev = evaluate_pairs(model, pairs, threshold=threshold)
    result = dict(ev.metrics)
    if report is not None:
        from .report import write_report

        folder = getattr(model, "path", None)  # where it was loaded from; None for a model built in memory
        named, data = Path(folder).name if folder else "the model", ev.pairs.source or "pairs"
        write_report(report, ev, title=f"{named} on {Path(data).name}", model=str(folder or named), data=data)
        result["report"] = str(report)
    if errors is not None:
        from .report import write_errors

        result["errors"] = {"path": str(errors), "pairs": write_errors(errors, ev)}
    return result


def benchmark(similarity, benchmarks: dict, *, default_threshold: float, root=None, metric: str = "accuracy") -> dict:
    """Evaluate any ``similarity(texts_a, texts_b) -> scores`` on named shared data sets.

    ``benchmarks`` maps a test set to the validation set its threshold is chosen on (or None to
    use ``default_threshold``); see :data:`siamese.data.datasets.BENCHMARKS`. Returns one report per set.
    """
    from ..data import datasets

    results = {}
    for test_name, val_name in benchmarks.items():
        threshold = default_threshold
        if val_name is not None:
            val = datasets.load(val_name, root)
            threshold, _ = choose_threshold(similarity(val.text1, val.text2), val.labels, metric)
        test = datasets.load(test_name, root)
        scores = similarity(test.text1, test.text2)
        report = classification_report(scores, test.labels, threshold)
        if test.scores is not None:
            report.update(correlation_report(scores, test.scores))
        report["threshold_from"] = val_name or "training validation"
        results[test_name] = report
    return results
