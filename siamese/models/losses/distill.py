"""Distillation from a teacher (Hinton et al. 2015; for sentence encoders Reimers & Gurevych
2020): the student's scores of every two texts in the batch should be the teacher's cosines.

The batch's texts (both sides of every pair, and any negatives) are scored all against all, so
one batch of n pairs gives 2n(2n − 1)/2 targets, not n: the teacher's view of texts that are
*not* paired (mostly unrelated, some close) is most of what it has to teach. Matching scores
rather than vectors lets the student keep its own width (MiniLM 384 vs mpnet 768). Labels are
not used: any pairs of texts, even texts paired at random, train.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .base import PairLoss


class DistillLoss(PairLoss):
    trains_on = "pairs"  # every pair, whatever its label
    uses_teacher = True  # called with teacher=(teacher vectors of side 1, side 2, ...), unit rows
    heads = ("cosine",)  # the targets are cosines
    heads_why = "its targets are the teacher's cosines"

    def forward(self, a, b, negative=None, labels=None, head=None, teacher=None) -> torch.Tensor:
        if teacher is None:
            raise ValueError("the distill loss needs the teacher's vectors of the batch (teacher=...)")
        student = torch.cat([a, b] if negative is None else [a, b, negative])
        target = torch.cat(list(teacher)).to(student.dtype)
        scores = self.head_or_cosine(head).matrix(student, student)
        goal = target @ target.T
        off_diagonal = ~torch.eye(
            len(student), dtype=torch.bool, device=student.device
        )  # a text with itself is 1 for both
        return F.mse_loss(scores[off_diagonal], goal[off_diagonal])
