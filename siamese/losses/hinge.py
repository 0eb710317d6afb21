"""Hinge margin loss on (anchor, positive, negative) triplets (Feng et al. 2015 answer selection):
``max(0, margin − cos(q, a⁺) + cos(q, a⁻))``, averaged over the triplets."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def hinge_loss(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float = 0.2) -> torch.Tensor:
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


class HingeLoss(nn.Module):
    """Module form of :func:`hinge_loss`."""

    def __init__(self, margin: float = 0.2):
        super().__init__()
        self.margin = margin

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return hinge_loss(anchor, positive, negative, self.margin)
