"""Hinge margin loss on (anchor, positive, negative) triplets (Feng et al. 2015 answer selection):
``max(0, margin − cos(q, a⁺) + cos(q, a⁻))``, averaged over the triplets."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .base import PairLoss


def hinge_loss(
    anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float = 0.2
) -> torch.Tensor:
    """Mean hinge loss. ``anchor`` and ``positive`` are (n, d); ``negative`` is (n, d), or
    (n, k, d) for k negatives per anchor (every wrong answer counts as its own triplet)."""
    anchor, positive, negative = (torch.as_tensor(x, dtype=torch.float32) for x in (anchor, positive, negative))
    good = F.cosine_similarity(anchor, positive, dim=-1)
    if negative.dim() == anchor.dim() + 1:
        bad = F.cosine_similarity(anchor.unsqueeze(1), negative, dim=-1)  # (n, k)
        good = good.unsqueeze(1)
    else:
        bad = F.cosine_similarity(anchor, negative, dim=-1)
    return torch.relu(margin - good + bad).mean()


class HingeLoss(PairLoss):
    """Module form of :func:`hinge_loss`. In the training loop it scores with the model's head;
    without explicit negatives, every other row of the batch is a wrong answer for a row."""

    default_margin = 0.2

    def forward(self, anchor, positive, negative=None, labels=None, head=None) -> torch.Tensor:
        """The mean hinge loss of the batch (see :func:`hinge_loss`; a head other than the cosine scores it)."""
        if head is None and negative is not None:
            return hinge_loss(anchor, positive, negative, self.margin)
        head = self.head_or_cosine(head)
        if negative is not None:
            return torch.relu(self.margin - head(anchor, positive) + head(anchor, negative)).mean()
        scores = head.matrix(anchor, positive)  # (n, n): row i against every candidate
        n = scores.shape[0]
        off_diagonal = ~torch.eye(n, dtype=torch.bool, device=scores.device)
        terms = torch.relu(self.margin - scores.diagonal()[:, None] + scores)
        return terms[off_diagonal].mean()
