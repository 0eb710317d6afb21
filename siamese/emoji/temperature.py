"""Readable emoji scores: cosines in [-1, 1] turned into probabilities by a softmax with one
temperature, fitted on validation tweets (temperature scaling, Guo et al. 2017).

Two temperatures are fitted. The *answer* temperature minimises the log-loss of the right answer
emoji among the three answers, so the 3-way sentiment probabilities are calibrated. Over all 874
emojis that temperature can be far too soft (when a model's cosines to the emojis lie close
together, as in a weakly trained one: ~0.1 % for every emoji); the *suggestion* temperature
instead maximises the probability mass the
softmax over every known emoji puts on the emojis of the tweet's sentiment (their class in the
Emoji Sentiment Ranking). A suggestion's probability is then its share of that softmax, and the
mass on a sentiment's emojis is calibrated on validation tweets.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, logsumexp, softmax

from ..decision.calibration import expected_calibration_error

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
    return {
        "temperature": temperature,
        "log_loss": log_loss(cosines, labels, temperature),
        "ece": top_label_ece(probabilities(cosines, temperature), labels),
        "n": int(len(labels)),
    }


def top_label_ece(probs: np.ndarray, labels: np.ndarray) -> float:
    """ECE of the most probable answer: its probability against whether it was right."""
    return expected_calibration_error(probs.max(axis=1), probs.argmax(axis=1) == np.asarray(labels))


def set_log_loss(cosines: np.ndarray, members: np.ndarray, temperature: float) -> float:
    """−mean log of the softmax mass on each row's ``members`` (bool, same shape); rows without
    any member are skipped."""
    keep = members.any(axis=1)
    logp = log_softmax(np.asarray(cosines, dtype=np.float64)[keep] / temperature, axis=-1)
    return float(-logsumexp(np.where(members[keep], logp, -np.inf), axis=1).mean())


def fit_set_temperature(cosines: np.ndarray, members: np.ndarray) -> dict:
    """The temperature whose softmax over all columns puts the most mass (in log-likelihood) on
    each row's member columns, with that log-loss and the mean mass it reaches."""
    members = np.asarray(members, dtype=bool)
    result = minimize_scalar(lambda t: set_log_loss(cosines, members, np.exp(t)), bounds=BOUNDS, method="bounded")
    temperature = float(np.exp(result.x))
    keep = members.any(axis=1)
    mass = (probabilities(cosines[keep], temperature) * members[keep]).sum(axis=1)
    return {
        "temperature": temperature,
        "log_loss": set_log_loss(cosines, members, temperature),
        "mean_mass": float(mass.mean()),
        "n": int(keep.sum()),
    }
