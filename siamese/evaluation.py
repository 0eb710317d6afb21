"""Metrics for pair classification and graded similarity, and the choice of a decision threshold."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn import metrics

from .errors import ConfigError

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


def evaluate(model: SiameseModel, pairs: Pairs, *, threshold: float | None = None) -> dict:
    """Score every pair with the model and report classification metrics (and correlations
    when the pairs carry graded scores). ``threshold`` defaults to the model's own."""
    scores = model.similarity(pairs.text1, pairs.text2)
    report = classification_report(scores, pairs.labels, model.threshold if threshold is None else threshold)
    if pairs.scores is not None:
        report.update(correlation_report(scores, pairs.scores))
    return report


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
