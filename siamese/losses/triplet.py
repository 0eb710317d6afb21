"""Triplet loss with hard negative mining over the batch (the seed's duplicate-question loss).

Row i of ``v1`` and ``v2`` is a duplicate pair; every other row of ``v2`` is a negative for it.
For each row, two hinge terms: one against the mean negative score, one against the closest
negative (the highest negative score still below the positive one).
"""

from __future__ import annotations

import numpy as np
import torch

from .base import PairLoss


def triplet_loss(v1, v2, margin: float = 0.25) -> torch.Tensor:
    """Sum over the batch of ``relu(m - pos + closest_neg) + relu(m - pos + mean_neg)``.

    ``v1`` and ``v2`` are (n, d) unit vectors (tensors or arrays), n >= 2.
    """
    v1 = torch.as_tensor(np.asarray(v1) if not torch.is_tensor(v1) else v1)
    v2 = torch.as_tensor(np.asarray(v2) if not torch.is_tensor(v2) else v2)
    return triplet_loss_from_scores(v2 @ v1.T, margin)


def triplet_loss_from_scores(scores: torch.Tensor, margin: float = 0.25) -> torch.Tensor:
    """The same loss from a score matrix: ``scores[i, j]`` scores side-2 row i against side-1 row j."""
    n = scores.shape[0]
    if n < 2:
        raise ValueError("triplet_loss needs a batch of at least 2 pairs (the others are the negatives)")
    positive = scores.diagonal()
    eye = torch.eye(n, dtype=torch.bool, device=scores.device)
    negatives = scores.masked_fill(eye, 0.0)
    mean_negative = negatives.sum(1) / (n - 1)
    # Push the diagonal and negatives scoring above the positive out of reach (scores are in [-1, 1]).
    exclude = eye | (negatives > positive[:, None])
    closest_negative = (negatives - 2.0 * exclude).max(1).values
    loss_closest = torch.relu(margin - positive + closest_negative)
    loss_mean = torch.relu(margin - positive + mean_negative)
    return (loss_closest + loss_mean).sum()


class TripletLoss(PairLoss):
    """Module form of :func:`triplet_loss` for the training loop (any similarity head)."""

    needs_labels = False
    default_margin = 0.25

    def forward(self, v1, v2, negative=None, labels=None, head=None) -> torch.Tensor:
        return triplet_loss_from_scores(self.head_or_cosine(head).matrix(v2, v1), self.margin)
