"""Binary cross-entropy on labelled pairs, for heads that output a duplicate probability."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .base import PROBABILITY_HEADS, PairLoss


class BCELoss(PairLoss):
    trains_on = "labelled"
    heads = PROBABILITY_HEADS

    def forward(self, a, b, negative=None, labels=None, head=None) -> torch.Tensor:
        y = labels.to(torch.float32)
        if head.classifier:  # classifier heads: the numerically stable form
            return F.binary_cross_entropy_with_logits(head.logits(a, b), y)
        return F.binary_cross_entropy(head(a, b).clamp(1e-6, 1 - 1e-6), y)
