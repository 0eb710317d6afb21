"""Triplet loss with hard negative mining over the batch (the seed's duplicate-question loss).

Row i of ``v1`` and ``v2`` is a duplicate pair; every other row of ``v2`` is a negative for it.
For each row, two hinge terms: one against the mean negative score, one against the closest
negative (the highest negative score still below the positive one).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def triplet_loss(v1, v2, margin: float = 0.25) -> torch.Tensor:
    """Sum over the batch of ``relu(m - pos + closest_neg) + relu(m - pos + mean_neg)``.

    ``v1`` and ``v2`` are (n, d) unit vectors (tensors or arrays), n >= 2.
    """
    v1 = torch.as_tensor(np.asarray(v1) if not torch.is_tensor(v1) else v1)
    v2 = torch.as_tensor(np.asarray(v2) if not torch.is_tensor(v2) else v2)
    n = v1.shape[0]
    if n < 2:
        raise ValueError("triplet_loss needs a batch of at least 2 pairs (the others are the negatives)")
    scores = v2 @ v1.T
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


class TripletLoss(nn.Module):
    """Module form of :func:`triplet_loss` for the training loop."""

    needs_labels = False

    def __init__(self, margin: float = 0.25):
        super().__init__()
        self.margin = margin

    def forward(self, v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
        return triplet_loss(v1, v2, self.margin)
