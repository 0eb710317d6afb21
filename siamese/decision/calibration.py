"""From a similarity score to a duplicate probability: Platt scaling, isotonic regression or
their average, chosen by cross-validated log-loss; calibration metrics (Brier, ECE, log-loss).

A fitted :class:`Calibrator` is plain JSON (Platt: two numbers; isotonic: its breakpoints; the
blend: both), kept
in the model folder's ``config.json`` under ``"calibration"``, outside the architecture: the
model's fingerprint does not change when it is calibrated.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, DataError
from ..models.pretrained import file_sha256
from .calibrator import METHODS, Calibrator  # noqa: F401 (Calibrator: re-exported)
from .threshold import PLATT_C, check_targets

if TYPE_CHECKING:
    from ..data.pairs import Pairs, PairsLike


def _fit_platt(scores: np.ndarray, labels: np.ndarray) -> dict:
    from sklearn.linear_model import LogisticRegression  # here: loading a calibrated model needs no sklearn

    lr = LogisticRegression(C=PLATT_C, max_iter=1000).fit(scores.reshape(-1, 1), labels)
    return {"a": float(lr.coef_[0, 0]), "b": float(lr.intercept_[0])}


def _fit_isotonic(scores: np.ndarray, labels: np.ndarray) -> dict:
    from sklearn.isotonic import IsotonicRegression

    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(scores, labels)
    # Isotonic regression puts exactly 0 or 1 on its end blocks; n pairs cannot justify more
    # certainty than Laplace's rule of succession, 1/(n+2), and a hard 0/1 makes log-loss infinite.
    n = len(scores)
    return {
        "x": iso.X_thresholds_.astype(float).tolist(),
        "y": iso.y_thresholds_.astype(float).tolist(),
        "clip": [1.0 / (n + 2), (n + 1.0) / (n + 2)],
    }


def _fit_blend(scores: np.ndarray, labels: np.ndarray) -> dict:
    # Isotonic follows the data's shape but is noisy on a few hundred pairs; Platt is steady but
    # bound to a sigmoid. Their mean keeps most of each one's strength (on the 300 shared Quora
    # pairs, MiniLM: cross-fitted ECE 0.068 Platt, 0.061 isotonic, 0.054 their mean).
    return {"platt": _fit_platt(scores, labels), "isotonic": _fit_isotonic(scores, labels)}


_FITTERS = {"platt": _fit_platt, "isotonic": _fit_isotonic, "blend": _fit_blend}


def _check(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel()
    if len(scores) != len(labels):
        raise ConfigError(f"{len(scores)} scores but {len(labels)} labels")
    if not np.all(np.isfinite(scores)):
        raise DataError("calibration scores must be finite numbers")
    if not np.isin(labels, (0, 1)).all():
        raise DataError("calibration labels must be 0 or 1")
    return scores, labels.astype(np.int64)


def fit_calibrator(scores, labels, *, method: str = "auto", folds: int = 5, seed: int = 0) -> Calibrator:
    """Fit Platt scaling, isotonic regression and their blend from similarity scores to 0/1 labels;
    keep the one (``method="auto"``) with the lowest out-of-fold log-loss over ``folds`` stratified
    folds, refitted on all the pairs. Every method's loss is recorded. Needs at least 2 pairs of
    each label."""
    check_method(method)
    scores, labels = _check(scores, labels)
    positives = int(labels.sum())
    fewest = min(positives, len(labels) - positives)
    if fewest < 2:
        raise DataError(
            f"calibration needs at least 2 pairs of each label (0 and 1); got {positives} duplicates "
            f"and {len(labels) - positives} non-duplicates"
        )
    folds = min(folds, fewest)
    from sklearn.metrics import log_loss

    cv = {
        m: float(log_loss(labels, cross_fitted(scores, labels, m, folds=folds, seed=seed), labels=[0, 1]))
        for m in METHODS
    }
    chosen = min(METHODS, key=lambda m: cv[m]) if method == "auto" else method  # ties: the simpler, in METHODS order
    return Calibrator(chosen, _FITTERS[chosen](scores, labels), len(labels), positives, cv, folds)


def cross_fitted(scores, labels, method: str, *, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Each pair's probability from a calibrator of ``method`` fitted on the other ``folds - 1``
    stratified folds (``auto``: chosen inside each fold, as :func:`fit_calibrator` chooses)."""
    check_method(method)
    scores, labels = _check(scores, labels)
    from sklearn.model_selection import StratifiedKFold

    out = np.empty(len(scores))
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(scores.reshape(-1, 1), labels):
        if method == "auto":
            fold = fit_calibrator(scores[train], labels[train])
        else:
            fold = Calibrator(
                method, _FITTERS[method](scores[train], labels[train]), len(train), int(labels[train].sum())
            )
        out[test] = fold(scores[test])
    return out


def expected_calibration_error(probabilities, labels, bins: int = 10) -> float:
    """ECE: over ``bins`` equal-width bins of [0, 1] (the last one closed), the share of pairs in
    each bin times |mean probability − share of duplicates| in it, summed."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, 1.0)
    y = np.asarray(labels, dtype=np.float64)
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    count = np.bincount(which, minlength=bins)
    gap = np.abs(np.bincount(which, p, bins) - np.bincount(which, y, bins))  # per bin: n·|confidence − accuracy|
    return float(gap.sum() / max(len(p), 1)) if count.any() else 0.0


def calibration_metrics(probabilities, labels) -> dict:
    """Brier score, ECE (10 bins) and log-loss of duplicate probabilities against 0/1 labels."""
    from sklearn.metrics import brier_score_loss, log_loss

    p = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, 1.0)
    y = np.asarray(labels).astype(int)
    return {
        "brier": float(brier_score_loss(y, p, pos_label=1)),
        "ece": expected_calibration_error(p, y),
        "log_loss": float(log_loss(y, p, labels=[0, 1])),
    }


def probabilities_or_clipped(scores, calibrator: Calibrator | None) -> np.ndarray:
    """The calibrated probabilities, or (uncalibrated) the raw score clipped to [0, 1]."""
    if calibrator is not None:
        return calibrator(scores)
    return np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)


def data_record(pairs: Pairs) -> dict:
    """Which pairs something was fitted on: the file (absolute path and SHA-256, when the pairs
    came from one; else the set's name) and how many pairs of it."""
    record = {"path": pairs.source, "pairs": len(pairs)}
    if pairs.source and Path(pairs.source).is_file():
        record["path"] = str(Path(pairs.source).resolve())
        record["sha256"] = file_sha256(pairs.source)
    return record


def calibrate(
    model: Any,  # a siamese.models.siamese.SiameseModel (decisions sit below the models: not imported)
    pairs: PairsLike,
    *,
    method: str = "auto",
    target_precision: float | None = None,
    target_recall: float | None = None,
    seed: int = 0,
    scores: np.ndarray | None = None,
) -> dict:
    """Fit ``model``'s calibrator on labelled ``pairs`` (anything :func:`siamese.data.pairs.as_pairs` takes: a pair
    file's path, rows, a table) and, with a target, set its threshold on them; the model is changed in memory
    only: save it (``model.save_fitted(folder)`` rewrites only the folder's config, as ``siamese calibrate`` does).

    Graded pairs (STS-B, SICK) are refused: their 0/1 labels are a cut of the grade, not what a
    duplicate probability should predict. Returns a summary (method, CV log-loss of both
    methods, ECE before and after on these pairs, the threshold and how it was chosen)."""
    from .threshold import threshold_for_target

    check_targets(target_precision, target_recall)  # before the (slow) scoring
    check_method(method)
    from ..data.pairs import as_pairs

    pairs = as_pairs(pairs)
    if pairs.scores is not None:
        raise DataError(
            f"{pairs.source}: graded pairs (similarity scores, not 0/1 labels) cannot calibrate a "
            "duplicate probability; use a file of 0/1 labelled pairs"
        )
    if scores is None:
        scores = np.asarray(model.similarity_pairwise(pairs.text1, pairs.text2))
    calibrator = fit_calibrator(scores, pairs.labels, method=method, seed=seed)
    fitted_on = data_record(pairs)
    calibrator = replace(calibrator, fitted_on=fitted_on)
    summary = {
        "method": calibrator.method,
        "cv_log_loss": calibrator.cv_log_loss,
        "folds": calibrator.folds,
        "pairs": len(pairs),
        "positives": calibrator.positives,
        **{k: v for k, v in fitted_on.items() if k != "pairs"},
        "ece_before": calibration_metrics(probabilities_or_clipped(scores, model.calibrator), pairs.labels)["ece"],
    }
    model.calibrator = calibrator
    summary["ece_after"] = calibration_metrics(calibrator(scores), pairs.labels)["ece"]
    if target_precision is not None or target_recall is not None:
        threshold, choice = threshold_for_target(scores, pairs.labels, precision=target_precision, recall=target_recall)
        model.set_threshold(threshold)
        model.info["threshold_choice"] = {**choice, "by": "calibrate", "data": fitted_on}
        summary["threshold_choice"] = choice
    summary["threshold"] = model.threshold
    return summary


def check_method(method: str) -> None:
    """Refuse an unknown calibration method, with a one-line message."""
    if method not in ("auto", *METHODS):
        raise ConfigError(f"calibration method must be auto, {', '.join(METHODS)}, got {method!r}")
