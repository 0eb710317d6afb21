"""Metrics for pair classification and graded similarity, and the choice of a decision threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn import metrics

from .calibration import calibration_metrics, check_targets, probabilities_or_clipped
from .errors import ConfigError, DataError

if TYPE_CHECKING:
    from .data import Pairs
    from .model import SiameseModel


def choose_threshold(scores: np.ndarray, labels: np.ndarray, metric: str = "accuracy") -> tuple[float, dict]:
    """The threshold (predict duplicate when score > t) that maximises ``metric`` on these pairs.

    Candidates are midpoints between consecutive distinct scores, so the choice does not sit
    on a validation score. Returns ``(threshold, {"metric": ..., "value": ...})``.
    """
    if metric not in ("accuracy", "f1"):
        raise ConfigError(f"threshold metric must be 'accuracy' or 'f1', got {metric!r}")
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    # Predicting the top k as positive, for every k at a boundary between distinct scores.
    tp = np.concatenate([[0], np.cumsum(y)])
    fp = np.concatenate([[0], np.cumsum(~y)])
    k = np.concatenate([[0], np.flatnonzero(np.diff(s) != 0) + 1, [len(s)]])
    tp, fp = tp[k], fp[k]
    pos, n = labels.sum(), len(labels)
    if metric == "accuracy":
        value = (tp + (n - pos - fp)) / n
    else:
        value = np.where(tp > 0, 2 * tp / np.maximum(tp + fp + pos, 1), 0.0)
    best = int(np.argmax(value))
    kb = k[best]
    upper = s[kb - 1] if kb > 0 else max(s[0], 1.0) + 1e-6
    lower = s[kb] if kb < len(s) else min(s[-1], -1.0) - 1e-6
    threshold = float((upper + lower) / 2)
    return threshold, {"metric": metric, "value": float(value[best])}


def threshold_for_target(
    scores: np.ndarray, labels: np.ndarray, *, precision: float | None = None, recall: float | None = None
) -> tuple[float, dict]:
    """A threshold (duplicate when score > t) meeting a target on these pairs.

    ``precision``: the lowest threshold whose precision reaches it (the most recall at that
    precision); ``recall``: the highest threshold whose recall reaches it (the most precision at
    that recall). Like :func:`choose_threshold`, the threshold sits midway between two distinct
    scores. An unreachable target is a :class:`DataError`. Returns ``(threshold, {"metric",
    "target", "precision", "recall", "pairs"})``.
    """
    check_targets(precision, recall)
    if (precision is None) == (recall is None):
        raise ConfigError("give a target precision or a target recall")
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    pos = int(labels.sum())
    if pos == 0:
        raise DataError("a target precision or recall needs duplicate pairs (label 1); these have none")
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    # Cut after the top k pairs (k at each boundary between distinct scores, k >= 1).
    k = np.concatenate([np.flatnonzero(np.diff(s) != 0) + 1, [len(s)]])
    tp = np.cumsum(y)[k - 1]
    precisions, recalls = tp / k, tp / pos
    if precision is not None:
        ok = np.flatnonzero(precisions >= precision - 1e-12)
        if not len(ok):
            raise DataError(
                f"no threshold reaches precision {precision} on these {len(s)} pairs "
                f"(the best is {precisions.max():.4f}); lower the target"
            )
        best = ok[-1]  # the largest k: the lowest threshold
    else:
        best = np.flatnonzero(recalls >= recall - 1e-12)[0]  # the smallest k: the highest threshold
    kb = k[best]
    lower = s[kb] if kb < len(s) else min(s[-1], -1.0) - 1e-6
    threshold = float((s[kb - 1] + lower) / 2)
    metric = "precision" if precision is not None else "recall"
    return threshold, {
        "metric": metric,
        "target": precision if precision is not None else recall,
        "precision": float(precisions[best]),
        "recall": float(recalls[best]),
        "pairs": int(len(s)),
    }


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


@dataclass
class Evaluation:
    """A model's scores on labelled pairs and the metrics: what a report or an error list is built from."""

    pairs: Pairs
    scores: np.ndarray  # similarity per pair
    probabilities: np.ndarray | None  # calibrated duplicate probability (None: model not calibrated)
    threshold: float
    metrics: dict

    @property
    def predicted(self) -> np.ndarray:
        return self.scores > self.threshold


def evaluate_pairs(model: SiameseModel, pairs: Pairs, *, threshold: float | None = None) -> Evaluation:
    """Score every pair; classification metrics at the threshold (default: the model's), calibration
    metrics (``brier``, ``ece``, ``log_loss``: of the calibrated probability, or of the raw score
    clipped to [0, 1] when the model is not calibrated; ``calibrated`` says which), and correlations
    when the pairs carry graded scores."""
    scores = model.similarity(pairs.text1, pairs.text2)
    threshold = model.threshold if threshold is None else threshold
    report = classification_report(scores, pairs.labels, threshold)
    report.update(calibration_metrics(probabilities_or_clipped(scores, model.calibrator), pairs.labels))
    report["calibrated"] = model.calibrator is not None
    if pairs.scores is not None:
        report.update(correlation_report(scores, pairs.scores))
    probabilities = model.calibrator(scores) if model.calibrator is not None else None
    return Evaluation(pairs, scores, probabilities, float(threshold), report)


def evaluate(model: SiameseModel, pairs: Pairs, *, threshold: float | None = None) -> dict:
    """The metrics of :func:`evaluate_pairs`."""
    return evaluate_pairs(model, pairs, threshold=threshold).metrics


def benchmark(similarity, benchmarks: dict, *, default_threshold: float, root=None, metric: str = "accuracy") -> dict:
    """Evaluate any ``similarity(texts_a, texts_b) -> scores`` on named shared data sets.

    ``benchmarks`` maps a test set to the validation set its threshold is chosen on (or None to
    use ``default_threshold``); see :data:`siamese.datasets.BENCHMARKS`. Returns one report per set.
    """
    from . import datasets

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
