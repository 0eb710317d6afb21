"""The decision after training, one way for every trainer: the threshold chosen on the validation
pairs (for a metric or a target precision/recall) and the similarity -> probability calibration
fitted on them. Too few or one-sided validation pairs fall back to something sound and say so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import DataError
from .threshold import choose_threshold, threshold_for_target

# Fewer validation pairs than this (or fewer of either label) choose a threshold by chance: 30
# Quora pairs chose 0.9969, which called nothing a duplicate.
MIN_VAL_PAIRS = 50
MIN_PER_LABEL = 10
MAX_FALLBACK_PAIRS = 5000  # training pairs scored for a fallback threshold (a random sample beyond)


def both_labels(pairs) -> bool:
    """Labelled pairs (not triplets) holding both labels, 0 and 1."""
    return pairs is not None and not pairs.triplets and len(set(np.asarray(pairs.labels).tolist())) == 2


def too_few(pairs, minimum: tuple[int, int] = (MIN_VAL_PAIRS, MIN_PER_LABEL)) -> str | None:
    """Why ``pairs`` cannot choose a threshold (None when they can): ``minimum`` pairs, and of each label."""
    if pairs is None or not len(pairs):
        return "no validation pairs"
    if pairs.triplets:
        return "the validation data are triplets, not labelled pairs"
    labels = np.asarray(pairs.labels).astype(bool)
    fewest = int(min(labels.sum(), (~labels).sum()))
    if fewest == 0:
        return f"the {len(pairs)} validation pairs have one label only"
    if len(pairs) < minimum[0] or fewest < minimum[1]:
        return (
            f"only {len(pairs)} validation pairs, {fewest} of the rarer label "
            f"(a choice needs {minimum[0]}, and {minimum[1]} of each label)"
        )
    return None


def check_target_pairs(target_precision: float | None, target_recall: float | None, val_pairs) -> bool:
    """Whether a target is asked for; refuses one when the validation pairs lack a label."""
    targeted = target_precision is not None or target_recall is not None
    if targeted and not both_labels(val_pairs):
        raise DataError(
            "a target precision or recall is chosen on validation pairs with both labels (0 and 1); "
            "these have not (give --val-data with both)"
        )
    return targeted


@dataclass
class Decision:
    """What :func:`decide` chose: the threshold, how (``choice``), the calibrator and its note."""

    threshold: float
    choice: dict
    calibrator: object | None = None
    calibration: dict = field(default_factory=lambda: {"fitted": False})

    def record(self) -> dict:
        """The decision's part of a model's ``info["training"]``."""
        return {"threshold": self.threshold, "threshold_choice": self.choice, "calibration": self.calibration}


def decide(
    similarity: Callable,
    val_pairs,
    train_pairs=None,
    *,
    default: float,
    metric: str = "accuracy",
    target_precision: float | None = None,
    target_recall: float | None = None,
    calibrate: bool = True,
    seed: int = 0,
    minimum: tuple[int, int] = (MIN_VAL_PAIRS, MIN_PER_LABEL),
) -> Decision:
    """The threshold and calibration of a trained model whose ``similarity(text1, text2)`` scores
    pairs. Chosen on ``val_pairs``; when they are too few or one-sided, on (a sample of)
    ``train_pairs`` if those have both labels, else ``default`` (the head's) — ``choice["note"]``
    says which and why; ``minimum``: the pairs, and of each label, a choice needs. A target
    precision/recall needs validation pairs with both labels."""
    why = too_few(val_pairs, minimum)
    targeted = check_target_pairs(target_precision, target_recall, val_pairs)
    if why is None or targeted:
        sims = np.asarray(similarity(val_pairs.text1, val_pairs.text2), dtype=np.float64)
        if targeted:
            threshold, choice = threshold_for_target(
                sims, val_pairs.labels, precision=target_precision, recall=target_recall
            )
        else:
            threshold, choice = choose_threshold(sims, val_pairs.labels, metric=metric)
        choice = {**choice, "split": "validation", "pairs": len(val_pairs)}
        return Decision(threshold, choice, *_calibration(sims, val_pairs, calibrate, seed))
    decision = _fallback(similarity, train_pairs, why, default=default, metric=metric, seed=seed)
    decision.calibration["note"] = "not asked for" if not calibrate else f"skipped: {why}"
    return decision


def _fallback(similarity, train_pairs, why: str, *, default: float, metric: str, seed: int) -> Decision:
    if not both_labels(train_pairs):
        note = f"the head's default, not chosen on data: {why}"
        return Decision(default, {"split": None, "pairs": 0, "note": note})
    rows = np.arange(len(train_pairs))
    if len(rows) > MAX_FALLBACK_PAIRS:
        rows = np.sort(np.random.default_rng(seed).choice(rows, MAX_FALLBACK_PAIRS, replace=False))
    text1, text2 = [train_pairs.text1[i] for i in rows], [train_pairs.text2[i] for i in rows]
    labels = np.asarray(train_pairs.labels)[rows]
    if len(set(labels.tolist())) < 2:
        note = f"the head's default, not chosen on data: {why}"
        return Decision(default, {"split": None, "pairs": 0, "note": note})
    threshold, choice = choose_threshold(np.asarray(similarity(text1, text2), np.float64), labels, metric=metric)
    note = f"chosen on {len(rows)} training pairs, which the model has seen: {why}"
    return Decision(threshold, {**choice, "split": "training", "pairs": len(rows), "note": note})


def _calibration(sims: np.ndarray, val_pairs, calibrate: bool, seed: int) -> tuple[object | None, dict]:
    """The calibrator fitted on the validation similarities, or None and a note saying why not."""
    from .calibration import data_record, fit_calibrator

    if not calibrate:
        return None, {"fitted": False, "note": "not asked for"}
    if not both_labels(val_pairs):
        return None, {"fitted": False, "note": "skipped: the validation pairs do not have both labels"}
    if getattr(val_pairs, "scores", None) is not None:
        note = "skipped: the validation pairs are graded, with scores rather than 0/1 labels"
        return None, {"fitted": False, "note": note}
    try:
        calibrator = fit_calibrator(sims, val_pairs.labels, seed=seed)
    except DataError as e:  # e.g. a single duplicate among the validation pairs
        return None, {"fitted": False, "note": f"skipped: {e}"}
    # the validation pairs may be a split of the file: "pairs" says how many of it
    calibrator = replace(calibrator, fitted_on={**data_record(val_pairs), "split": "validation"})
    return calibrator, {"fitted": True, "method": calibrator.method}


def threshold_line(threshold: float, choice: dict, val_pairs: int) -> str:
    """A chosen threshold for people (rounded; full precision in the JSON) and how it was chosen."""
    if "note" in choice:
        return f"threshold {threshold:.3f} ({choice['note']})"
    if val_pairs:
        return f"threshold {threshold:.3f} (chosen on {val_pairs} validation pairs)"
    return f"threshold {threshold:.3f} (no validation pairs: the head's default, not chosen on data)"
