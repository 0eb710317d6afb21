"""Triplet loss with hard negative mining over the batch (the default duplicate-question loss).

Row i of ``v1`` and ``v2`` is a duplicate pair; every other row of ``v2`` is a negative for it.
For each row, two hinge terms: one against the mean negative score, one against the closest
negative (the highest negative score still below the positive one). Explicit negatives (answer
triplets) join the batch's rows as candidates for every anchor.

Training averages the terms over the batch (``reduction="mean"``, like every
other loss here) so that the step size does not grow with the batch size.
"""

from __future__ import annotations

import numpy as np
import torch

from .base import PairLoss

REDUCTIONS = ("mean", "sum")


def triplet_loss(v1, v2, margin: float = 0.25, reduction: str = "mean") -> torch.Tensor:
    """Mean (or sum) over the batch of ``relu(m - pos + closest_neg) + relu(m - pos + mean_neg)``.

    ``v1`` and ``v2`` are (n, d) unit vectors (tensors or arrays), n >= 2.
    """
    v1 = torch.as_tensor(np.asarray(v1) if not torch.is_tensor(v1) else v1)
    v2 = torch.as_tensor(np.asarray(v2) if not torch.is_tensor(v2) else v2)
    return triplet_loss_from_scores(v2 @ v1.T, margin, reduction)


def triplet_loss_from_scores(scores: torch.Tensor, margin: float = 0.25, reduction: str = "mean") -> torch.Tensor:
    """The same loss from an (n, m) score matrix, m >= n: ``scores[i, i]`` is row i's positive and
    every other entry of row i a negative (with ``scores = v2 @ v1.T``: side-2 row i against side-1 row j)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    n, m = scores.shape
    if n < 2 or m < n:
        raise ValueError("triplet_loss needs a batch of at least 2 pairs (the others are the negatives)")
    positive = scores.diagonal()
    eye = torch.eye(n, m, dtype=torch.bool, device=scores.device)
    negatives = scores.masked_fill(eye, 0.0)
    mean_negative = negatives.sum(1) / (m - 1)
    # Push the diagonal and negatives scoring above the positive out of reach (scores are in [-1, 1]).
    exclude = eye | (negatives > positive[:, None])
    closest_negative = (negatives - 2.0 * exclude).max(1).values
    loss_closest = torch.relu(margin - positive + closest_negative)
    loss_mean = torch.relu(margin - positive + mean_negative)
    losses = loss_closest + loss_mean
    return losses.mean() if reduction == "mean" else losses.sum()


class TripletLoss(PairLoss):
    """Module form of :func:`triplet_loss` for the training loop (any similarity head)."""

    needs_labels = False
    default_margin = 0.25

    def forward(self, v1, v2, negative=None, labels=None, head=None) -> torch.Tensor:
        """The batch's triplet loss (see :func:`triplet_loss`), scored by ``head`` (default: the cosine)."""
        head = self.head_or_cosine(head)
        if negative is None:
            return triplet_loss_from_scores(head.matrix(v2, v1), self.margin)
        # Anchors against every positive and every explicit negative of the batch.
        return triplet_loss_from_scores(head.matrix(v1, torch.cat([v2, negative])), self.margin)
