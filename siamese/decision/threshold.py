"""Choosing a decision threshold on scored, labelled pairs: the one maximising a metric, or one
meeting a target precision or recall. Only numpy: every layer that decides a threshold uses it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, DataError


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
