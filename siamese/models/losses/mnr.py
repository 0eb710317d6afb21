"""Multiple-negatives ranking loss (Henderson et al. 2017; sentence-transformers' MNRL): each row
must pick its own partner out of every partner in the batch — a softmax over scaled scores."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .base import PairLoss


class MultipleNegativesRankingLoss(PairLoss):
    """Cross-entropy of ``scale · score(a_i, b_j)`` over j with target i; explicit ``negative``
    rows are extra candidates for every row."""

    default_scale = 20.0  # cosines live in [-1, 1]: sharpen them before the softmax

    def forward(self, a, b, negative=None, labels=None, head=None) -> torch.Tensor:
        head = self.head_or_cosine(head)
        scores = head.matrix(a, b)
        if negative is not None:
            scores = torch.cat([scores, head.matrix(a, negative)], 1)
        return F.cross_entropy(self.scale * scores, torch.arange(len(a), device=a.device))
