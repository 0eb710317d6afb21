"""CoSENT (Su 2022): a ranking loss on graded pairs. For every two pairs of a batch whose gold
similarity is ordered (i above j), the model's score of i should be above j's:
``log(1 + Σ exp(scale · (s_j − s_i)))``. Uses graded scores (STS-B, SICK) where the data has
them, else the 0/1 labels."""

from __future__ import annotations

import torch

from .base import PairLoss


class CoSENTLoss(PairLoss):
    trains_on = "labelled"
    uses_scores = True  # graded gold similarity when the pairs carry it

    default_scale = 20.0  # cosines live in [-1, 1]: sharpen the differences

    def forward(self, a, b, negative=None, labels=None, head=None) -> torch.Tensor:
        s = self.scale * self.head_or_cosine(head)(a, b)
        ordered = labels[:, None] > labels[None, :]  # gold(i) > gold(j)
        diff = (s[None, :] - s[:, None]).masked_fill(~ordered, float("-inf"))  # s_j - s_i
        # the 1 of log(1 + Σ …): a zero on the scores' own device (a CPU zero breaks a GPU batch)
        return torch.logsumexp(torch.cat([s.new_zeros(1), diff.flatten()]), 0)
