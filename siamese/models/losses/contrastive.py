"""Contrastive loss (Hadsell, Chopra & LeCun 2006) on labelled pairs: pull duplicates together,
push non-duplicates at least ``margin`` apart. The distance is ``1 − head score``."""

from __future__ import annotations

import torch

from .base import PairLoss


class ContrastiveLoss(PairLoss):
    trains_on = "labelled"
    default_margin = 0.5

    def forward(self, a, b, negative=None, labels=None, head=None) -> torch.Tensor:
        distance = 1 - self.head_or_cosine(head)(a, b)
        y = labels.to(distance.dtype)
        return 0.5 * (y * distance.pow(2) + (1 - y) * torch.relu(self.margin - distance).pow(2)).mean()
