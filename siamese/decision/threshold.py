"""Choosing a decision threshold on scored, labelled pairs: the one maximising a metric on them
(:func:`choose_threshold`), the one to decide new pairs by from a few hundred labels (:func:`fit_threshold`:
where a Platt fit crosses 1/2), or one meeting a target precision or recall. Only numpy: every layer
that decides a threshold uses it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError, DataError

# Platt scaling is unregularised logistic regression; a tiny L2 term only keeps the slope finite
# when the scores separate the labels perfectly (it changes nothing measurable otherwise).
PLATT_C = 1e4
# fit_threshold keeps the Platt cut unless it is this much less accurate on the labels than the
# best cut: the duplicates' odds are then not a rising sigmoid of the score (PAWS-QQP's word swaps)
PLATT_GUARD = 0.05


def check_threshold(value: float, what: str = "threshold") -> float:
    """``value`` as a threshold a similarity is compared with: finite and in [-1, 1] (a cosine; probabilities and
    the other heads' scores lie in [0, 1]). Outside it a run calls nothing or everything a duplicate, and writes a
    folder its readers refuse; a percentage (90 for 0.9) is the usual slip, and the message says so."""
    if isinstance(value, (str, bytes, bool)):  # float("0.9") would pass: a number is asked for
        raise ConfigError(f"{what} must be a number in [-1, 1], got {type(value).__name__} {value!r:.40}")
    value = float(value)
    if math.isfinite(value) and -1.0 <= value <= 1.0:
        return value
    hint = f"; a percentage? {value:g} % is {value / 100:g}" if 10.0 <= value <= 100.0 else ""
    raise ConfigError(f"{what} must be a number in [-1, 1] (a cosine; a probability is in [0, 1]), got {value:g}{hint}")


def check_targets(precision: float | None, recall: float | None) -> None:
    """At most one target, in (0, 1]: checked before anything slow runs."""
    if precision is not None and recall is not None:
        raise ConfigError("give a target precision or a target recall, not both")
    for name, value in (("precision", precision), ("recall", recall)):
        if value is not None and not 0.0 < value <= 1.0:
            raise ConfigError(f"target {name} must be in (0, 1], got {value}")


def choose_threshold(scores: np.ndarray, labels: np.ndarray, metric: str = "accuracy") -> tuple[float, dict[str, Any]]:
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


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) without overflow warnings at extreme z (scipy's expit costs 0.2 s of import)."""
    out: np.ndarray = np.exp(-np.logaddexp(0.0, -np.asarray(z)))
    return out


def chance(fit: tuple[float, float], similarity: np.ndarray | float) -> np.ndarray:
    """The chance of a duplicate at ``similarity`` by a :func:`platt` fit ``(a, b)``."""
    return sigmoid(fit[0] * np.asarray(similarity, dtype=np.float64) + fit[1])


def platt(similarity: np.ndarray, labels: np.ndarray) -> tuple[float, float] | None:
    """Platt's ``(a, b)`` (chance = 1 / (1 + exp(-(a·s + b)))), or None without both labels.

    The fit of :mod:`siamese.decision.calibration`'s Platt scaling (the same objective: log-loss plus
    ``a² / (2·PLATT_C)``), solved by Newton's method on its two numbers: the labelling loop refits it for
    every pair it chooses and a hundred times per bootstrap, where scikit-learn's solver costs ~100x more
    per call."""
    x = np.asarray(similarity, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if len(y) < 2 or y.min() == y.max():
        return None
    w = np.zeros(2)  # (a, b)
    ridge = np.array([1.0 / PLATT_C, 0.0])
    loss = _platt_loss(w, x, y, ridge)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(w[0] * x + w[1], -500, 500)))
        g = np.array([np.dot(p - y, x), np.sum(p - y)]) + ridge * w
        h = p * (1 - p)
        hess = np.array([[np.dot(h, x * x), np.dot(h, x)], [np.dot(h, x), h.sum()]]) + np.diag(ridge + 1e-12)
        step = np.linalg.solve(hess, g)
        scale = 1.0
        while scale > 1e-6:  # halve the step until the loss falls
            trial = w - scale * step
            trial_loss = _platt_loss(trial, x, y, ridge)
            if trial_loss <= loss:
                break
            scale /= 2
        if scale <= 1e-6 or loss - trial_loss < 1e-12 * max(1.0, loss):
            w, loss = (trial, trial_loss) if scale > 1e-6 else (w, loss)
            break
        w, loss = trial, trial_loss
    return float(w[0]), float(w[1])


def _platt_loss(w: np.ndarray, x: np.ndarray, y: np.ndarray, ridge: np.ndarray) -> float:
    z = w[0] * x + w[1]
    return float(np.sum(np.logaddexp(0, z) - y * z) + 0.5 * np.dot(ridge * w, w))


def fit_threshold(scores: np.ndarray, labels: np.ndarray, metric: str = "accuracy") -> tuple[float, dict[str, Any]]:
    """The threshold to decide new pairs by, from a few hundred labelled ones. For accuracy: where a
    Platt fit of P(duplicate | score) on the labels crosses 1/2, unless that cut is more than
    :data:`PLATT_GUARD` less accurate on the labels than :func:`choose_threshold`'s best cut (or
    the fit does not rise with the score): then the best cut. For F1: the best cut.

    The best cut of a few hundred labels follows their noise: on pool pairs outside 50-500 labels of
    the six bench-learn sets it was 0.3-1.5 points less accurate than the Platt cut on five sets
    (bench/threshold_selection.py, docs/benchmarks.md); on PAWS-QQP, whose word swaps score highest,
    the Platt cut fell among the swaps (0.70 against 0.80 at 200 labels), which the guard catches.
    Returns ``(threshold, {"metric", "value", "rule"})``: the accuracy on the labels and which rule
    chose."""
    best, found = choose_threshold(scores, labels, metric)
    if metric != "accuracy":
        return best, {**found, "rule": "best cut"}
    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    fit = platt(scores, y)
    if fit is not None and fit[0] > 1e-9:
        cut = float(np.clip(-fit[1] / fit[0], scores.min() - 0.05, scores.max() + 0.05))
        accuracy = float(np.mean((scores > cut) == y))
        if accuracy >= found["value"] - PLATT_GUARD:
            return cut, {"metric": metric, "value": accuracy, "rule": "platt"}
    return best, {**found, "rule": "best cut"}


def threshold_for_target(
    scores: np.ndarray, labels: np.ndarray, *, precision: float | None = None, recall: float | None = None
) -> tuple[float, dict[str, Any]]:
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
        assert recall is not None  # check_targets: one of the two is given
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
