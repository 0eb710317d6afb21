"""A fitted similarity -> probability calibration (:class:`Calibrator`): plain JSON in a model
folder's config.json, applied with numpy alone, so loading a model imports no scikit-learn (the
fitting, in siamese.decision.calibration, does)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .threshold import sigmoid

METHODS = ("platt", "isotonic", "blend")


@dataclass(frozen=True)
class Calibrator:
    """``probability = calibrator(similarity)``, monotone in the similarity.

    ``params``: Platt ``{"a", "b"}`` with p = 1 / (1 + exp(-(a·s + b))); isotonic ``{"x", "y",
    "clip"}``: linear interpolation between the breakpoints (flat beyond them, as sklearn's
    ``out_of_bounds="clip"``), then clipped to ``clip``; blend ``{"platt": ..., "isotonic": ...}``:
    the mean of the two probabilities.
    """

    method: str
    params: dict
    pairs: int  # how many pairs it was fitted on
    positives: int
    cv_log_loss: dict = field(default_factory=dict)  # method -> out-of-fold log-loss
    folds: int = 0
    fitted_on: dict | None = None  # {"path", "pairs", "sha256"} when fitted on a file

    def __call__(self, scores) -> np.ndarray:
        """The probabilities of ``scores`` (similarities)."""
        return _apply(self.method, self.params, np.asarray(scores, dtype=np.float64))

    def to_dict(self) -> dict:
        """The calibration as JSON (what config.json keeps)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw) -> Calibrator:
        """Rebuild from :meth:`to_dict`'s JSON, checking every field (ValueError names the bad one)."""
        if not isinstance(raw, dict):
            raise ValueError("calibration must be a JSON object")
        method, params = raw.get("method"), raw.get("params")
        if method not in METHODS:
            raise ValueError(f"calibration method must be one of {', '.join(METHODS)}, got {method!r}")
        if not isinstance(params, dict):
            raise ValueError("calibration 'params' must be a JSON object")

        return cls(
            method=method,
            params=_checked_params(method, params),
            pairs=int(raw.get("pairs", 0)),
            positives=int(raw.get("positives", 0)),
            cv_log_loss=dict(raw.get("cv_log_loss") or {}),
            folds=int(raw.get("folds", 0)),
            fitted_on=raw.get("fitted_on"),
        )


def _apply(method: str, params: dict, s: np.ndarray) -> np.ndarray:
    if method == "platt":
        return sigmoid(params["a"] * s + params["b"])
    if method == "blend":
        return 0.5 * (_apply("platt", params["platt"], s) + _apply("isotonic", params["isotonic"], s))
    lo, hi = params["clip"]
    return np.clip(np.interp(s, params["x"], params["y"]), lo, hi)


def _number(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"calibration parameter {name!r} must be a finite number, got {v!r}")
    return float(v)


def _checked_params(method: str, params: dict) -> dict:
    """``params`` of ``method`` as read from JSON, every field checked (ValueError names it)."""
    if method == "platt":
        return {"a": _number(params.get("a"), "a"), "b": _number(params.get("b"), "b")}
    if method == "blend":
        parts = {m: params.get(m) for m in ("platt", "isotonic")}
        if not all(isinstance(v, dict) for v in parts.values()):
            raise ValueError("blend calibration needs objects 'platt' and 'isotonic'")
        return {m: _checked_params(m, v) for m, v in parts.items()}
    x, y, clip = params.get("x"), params.get("y"), params.get("clip")
    if not (isinstance(x, list) and isinstance(y, list) and len(x) == len(y) >= 1):
        raise ValueError("isotonic calibration needs lists 'x' and 'y' of the same non-zero length")
    if not (isinstance(clip, list) and len(clip) == 2):
        raise ValueError("isotonic calibration needs 'clip': [low, high]")
    x = [_number(v, "x") for v in x]
    y = [_number(v, "y") for v in y]
    clip = [_number(v, "clip") for v in clip]
    if any(b < a for a, b in zip(x, x[1:])) or any(b < a for a, b in zip(y, y[1:])):
        raise ValueError("isotonic calibration 'x' and 'y' must be non-decreasing")
    if not 0 <= clip[0] <= clip[1] <= 1 or not all(0 <= v <= 1 for v in y):
        raise ValueError("isotonic calibration values must lie in [0, 1]")
    return {"x": x, "y": y, "clip": clip}
