"""What an evaluation leaves: the scores of labelled pairs and their metrics, from which a report or an error list
is built (its own module: :mod:`.metrics` makes it and :mod:`.report` reads it, and metrics writes reports)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.pairs import Pairs


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
        """The duplicate verdicts at the threshold."""
        return self.scores > self.threshold
