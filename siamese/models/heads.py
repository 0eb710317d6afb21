"""Heads turn two encodings into one score per pair: ``head(a, b) -> (n,)``.

Two families:

* **similarity heads** (``cosine``, ``manhattan``) have no weights and can score every pair of a
  batch at once with :meth:`matrix`, which the in-batch losses (triplet, hinge, MNR) need;
* **classifier heads** (``l1``, ``concat``, ``symmetric``) end in Dense(1, sigmoid) and give the
  probability that the pair is a duplicate; they are trained with binary cross-entropy.
"""

from __future__ import annotations

import torch
from torch import nn


class Head(nn.Module):
    """``head(a, b) -> (n,)``: one score per pair of encodings. Declares whether it is a
    classifier (weights, a probability, :meth:`logits`) and whether encoders should hand it unit
    vectors; similarity heads also score every pair of a batch at once (:meth:`matrix`)."""

    classifier: bool = False
    unit_vectors: bool = False
    score_range: tuple[float, float] = (0.0, 1.0)  # what a threshold can sensibly be (clip_threshold)

    def matrix(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{type(self).__name__} scores aligned pairs only, not every pair of a batch")


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of rows; encoders already return unit vectors, so a row-wise dot product."""
    return (a * b).sum(-1)


class CosineHead(Head):
    """cos(a, b) in [-1, 1] (the foundation model's head)."""

    unit_vectors = True  # encoders L2-normalise for this head, so the dot product is the cosine
    score_range = (-1.0, 1.0)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return cosine(a, b)

    def matrix(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b.T


class ManhattanHead(Head):
    """exp(−‖a − b‖₁) in (0, 1] (MaLSTM, Mueller & Thyagarajan 2016), on unnormalised encodings."""

    score_range = (0.0, 1.0)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.exp(-(a - b).abs().sum(-1))

    def matrix(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.exp(-torch.cdist(a, b, p=1))


class ClassifierHead(Head):
    """Dense(1, sigmoid) over features of the pair; subclasses say which features."""

    classifier = True

    def __init__(self, dim: int, width_factor: int = 1):
        super().__init__()
        self.dense = nn.Linear(width_factor * dim, 1)

    def features(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def logits(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.dense(self.features(a, b)).squeeze(-1)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logits(a, b))


class L1Head(ClassifierHead):
    """``1 − |a − b|`` → Dense(1, sigmoid) (the Keras "Siamese recipes" head)."""

    def __init__(self, dim: int):
        super().__init__(dim)

    def features(self, a, b):
        return 1 - (a - b).abs()


class ConcatHead(ClassifierHead):
    """``[a, b]`` → Dense(1, sigmoid) (the BERT recipe). Not symmetric in a and b."""

    def __init__(self, dim: int):
        super().__init__(dim, 2)

    def features(self, a, b):
        return torch.cat([a, b], -1)


class SymmetricHead(ClassifierHead):
    """``[|a − b|, a ⊙ b]`` → Dense(1, sigmoid): the concatenation made order-free."""

    def __init__(self, dim: int):
        super().__init__(dim, 2)

    def features(self, a, b):
        return torch.cat([(a - b).abs(), a * b], -1)


HEADS: dict[str, type[Head]] = {
    "cosine": CosineHead,
    "manhattan": ManhattanHead,
    "l1": L1Head,
    "concat": ConcatHead,
    "symmetric": SymmetricHead,
}


def clip_threshold(name: str, threshold: float) -> float:
    """``threshold`` within the scores head ``name`` can give: a threshold chosen just above the
    top validation score (1.0000005 for a cosine) would otherwise make a model that never says yes."""
    lo, hi = HEADS[name].score_range
    return float(min(max(threshold, lo), hi))


def build_head(name: str, dim: int) -> Head:
    from ..errors import ModelError

    if name not in HEADS:
        raise ModelError(f"unknown head {name!r}; choose one of: {', '.join(HEADS)}")
    cls = HEADS[name]
    return cls(dim) if cls.classifier else cls()
