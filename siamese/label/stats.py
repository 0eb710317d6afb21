"""What the answers so far say: the threshold, the calibration, and the estimated precision and
recall over the corpus's candidate pairs, with bootstrap intervals.

The answers are not a random sample (the loop asks near the threshold), so metrics counted on
them would be biased. What is not biased by choosing pairs by their similarity is the chance of
a duplicate *at* a similarity, P(duplicate | s): a Platt fit (:mod:`siamese.decision.calibration`) on the
answers estimates it, and every figure is read off it over the candidate pairs:

* the threshold is the most accurate cut of the candidates by the chances of the calibrator
  ``siamese calibrate`` fits (with Platt alone: where the chance crosses 1/2, which is what the
  choice of the next pair aims at, refitted for every pair);
* precision at t: the mean chance over the candidates above t; recall: their share of the sum of
  chances over all candidates;
* the threshold for a target precision: the lowest t whose estimated precision reaches it;
* intervals: the 2.5 and 97.5 percentiles over fits on resampled answers.
"""

from __future__ import annotations

import math

import numpy as np

from ..decision.calibration import cross_fitted, expected_calibration_error, fit_calibrator
from ..decision.threshold import chance, platt
from ..errors import DataError
from ..evaluation.metrics import choose_threshold

UNCERTAIN = math.log(3.0)  # Platt's a·(s - t) between ±ln 3: a chance between 0.25 and 0.75
# How narrow the precision's interval should be for the page to call the answers enough: ±5 points.
PRECISION_MARGIN = 0.05


def threshold(similarity, labels) -> tuple[float | None, float | None]:
    """``(threshold, width)``: where the fitted chance of a duplicate is 1/2, and the half-width of
    the band where it is between 0.25 and 0.75; (None, None) until both labels were given."""
    similarity = np.asarray(similarity, dtype=np.float64)
    fit = platt(similarity, labels)
    if fit is None:
        return None, None
    a, b = fit
    if a <= 1e-9:  # duplicates no likelier at a higher similarity: the best cut on the answers
        return choose_threshold(similarity, labels)[0], float(np.ptp(similarity) / 4 or 0.05)
    t = float(np.clip(-b / a, similarity.min() - 0.05, similarity.max() + 0.05))
    return t, float(np.clip(UNCERTAIN / a, 0.005, 0.25))


def estimate(fit: tuple[float, float], candidates: np.ndarray, t: float) -> tuple[float, float, int]:
    """Estimated precision and recall over ``candidates`` at ``t``, and how many are above it."""
    p = chance(fit, candidates)
    above = candidates > t
    flagged = int(above.sum())
    precision = float(p[above].mean()) if flagged else math.nan
    recall = float(p[above].sum() / p.sum()) if p.sum() > 0 else math.nan
    return precision, recall, flagged


def for_precision(fit: tuple[float, float], candidates: np.ndarray, target: float) -> float | None:
    """The lowest threshold whose estimated precision over ``candidates`` reaches ``target``."""
    s = np.sort(candidates)[::-1]
    if not len(s):
        return None
    running = np.cumsum(chance(fit, s)) / np.arange(1, len(s) + 1)  # precision cutting after each
    ok = np.flatnonzero(running >= target)
    if not len(ok):
        return None
    k = ok[-1]
    below = s[k + 1] if k + 1 < len(s) else s[k] - 1e-3
    return float((s[k] + below) / 2)


def summary(
    similarity,
    labels,
    candidates,
    *,
    model_threshold: float,
    target_precision: float = 0.9,
    resamples: int = 100,
    seed: int = 0,
) -> dict:
    """Everything the page shows about the answers so far (see the module's doc)."""
    similarity = np.asarray(similarity, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    candidates = np.asarray(candidates, dtype=np.float64)
    out = {
        "answers": int(len(labels)),
        "duplicates": int(labels.sum()),
        "model_threshold": model_threshold,
        "model_flags": int((candidates > model_threshold).sum()),
        "candidates": int(len(candidates)),
        "target_precision": target_precision,
        "threshold": None,
        "calibration": None,
    }
    t, _ = threshold(similarity, labels)
    fit = platt(similarity, labels)
    if t is None or fit is None:
        return out
    calibrator = fitted_calibrator(similarity, labels)
    if calibrator is not None:
        t = most_accurate(calibrator, candidates)
    precision, recall, flagged = estimate(fit, candidates, t)
    out.update(threshold=t, precision=precision, recall=recall, flags=flagged)
    out.update(_intervals(similarity, labels, candidates, t, resamples, seed))
    out["precision_margin"] = PRECISION_MARGIN
    out["more_answers"] = more_answers(len(labels), out.get("precision_interval"))
    target = for_precision(fit, candidates, target_precision)
    out["target_threshold"] = target
    if target is not None:
        out["target_recall"], out["target_flags"] = estimate(fit, candidates, target)[1:]
    out["calibration"] = _calibration(calibrator, similarity, labels)
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}


def _intervals(similarity, labels, candidates, t: float, resamples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(resamples):
        pick = rng.integers(0, len(labels), len(labels))
        fit = platt(similarity[pick], labels[pick])
        if fit is not None:
            found.append(estimate(fit, candidates, t)[:2])
    found = np.array(found).reshape(-1, 2)
    found = found[np.isfinite(found).all(axis=1)]  # a resample whose fit flags no candidate has no precision
    if len(found) < 10:
        return {}
    lo, hi = np.percentile(found, [2.5, 97.5], axis=0)
    return {"precision_interval": [float(lo[0]), float(hi[0])], "recall_interval": [float(lo[1]), float(hi[1])]}


def more_answers(answers: int, interval, margin: float = PRECISION_MARGIN) -> int | None:
    """About how many more answers bring the precision's interval to ±``margin``: a bootstrap
    interval narrows as 1/√n, so n·(width / (2·margin))² answers in all. 0 when it is that narrow
    already; None without an interval."""
    if not interval or answers < 1:
        return None
    width = float(interval[1] - interval[0])
    if width <= 2 * margin:
        return 0
    return max(1, math.ceil(answers * (width / (2 * margin)) ** 2) - answers)


def fitted_calibrator(similarity, labels):
    """The calibrator ``siamese calibrate`` would fit on these answers (None: under 2 of a label)."""
    try:
        return fit_calibrator(similarity, labels)
    except DataError:
        return None


def most_accurate(calibrator, candidates) -> float:
    """The threshold with the most accurate cut of ``candidates`` by the calibrated chances: each
    candidate above it counts its chance of a duplicate, each below it the chance of not one.
    For Platt alone it is the crossing of 1/2; an isotonic or blended calibrator whose chance stays
    under 1/2 (as on PAWS, where duplicates and not score alike) flags nothing."""
    s = np.sort(np.asarray(candidates, dtype=np.float64))
    if not len(s):
        return 0.5
    p = calibrator(s)
    above = np.cumsum(p[::-1])[::-1]  # cutting just under s[i]: the chances of s[i:]
    below = np.concatenate([[0.0], np.cumsum(1 - p)[:-1]])  # ... and 1 - chance of s[:i]
    gain = np.concatenate([above + below, [np.sum(1 - p)]])
    i = int(np.argmax(gain))
    if i == len(s):
        return float(s[-1] + 1e-3)  # nothing flagged
    return float((s[i] + s[i - 1]) / 2) if i > 0 else float(s[0] - 1e-3)


def _calibration(fitted, similarity, labels) -> dict | None:
    """The calibrator's method, cross-validated log-loss and cross-fitted ECE on the answers."""
    if fitted is None:
        return None
    out = cross_fitted(similarity, labels, fitted.method, folds=fitted.folds)
    return {
        "method": fitted.method,
        "cv_log_loss": fitted.cv_log_loss[fitted.method],
        "cv_ece": expected_calibration_error(out, labels),
    }


__all__ = [
    "chance",
    "estimate",
    "fitted_calibrator",
    "for_precision",
    "more_answers",
    "most_accurate",
    "platt",
    "summary",
    "threshold",
]
