"""Readable emoji scores: cosines in [-1, 1] turned into probabilities by a softmax with one
temperature, fitted on validation tweets (temperature scaling, Guo et al. 2017).

The temperature minimises the log-loss of the right answer emoji among the three answers, so the
3-way probabilities are calibrated; the same temperature over all known emojis gives suggestion
scores that sum to 1 and let the top choices stand out from the rest.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

from ..calibration import expected_calibration_error

BOUNDS = (np.log(1e-3), np.log(10.0))  # temperatures a cosine score can sensibly need


def probabilities(cosines: np.ndarray, temperature: float) -> np.ndarray:
    """Softmax of each row of cosines at ``temperature``."""
    return softmax(np.asarray(cosines, dtype=np.float64) / temperature, axis=-1)


def log_loss(cosines: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    logp = log_softmax(np.asarray(cosines, dtype=np.float64) / temperature, axis=-1)
    return float(-logp[np.arange(len(labels)), labels].mean())


def fit_temperature(cosines: np.ndarray, labels: np.ndarray) -> dict:
    """The temperature with the least log-loss of ``labels`` (column indices) on these rows, with
    the log-loss and expected calibration error it reaches."""
    labels = np.asarray(labels)
    result = minimize_scalar(lambda t: log_loss(cosines, labels, np.exp(t)), bounds=BOUNDS, method="bounded")
    temperature = float(np.exp(result.x))
    return {"temperature": temperature, "log_loss": log_loss(cosines, labels, temperature),
            "ece": top_label_ece(probabilities(cosines, temperature), labels), "n": int(len(labels))}


def top_label_ece(probs: np.ndarray, labels: np.ndarray) -> float:
    """ECE of the most probable answer: its probability against whether it was right."""
    return expected_calibration_error(probs.max(axis=1), probs.argmax(axis=1) == np.asarray(labels))

