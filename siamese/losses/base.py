"""What every training loss shares: its call signature, what data it trains on, which heads fit.

A loss is called as ``loss(a, b, negative=None, labels=None, head=None)`` on the encodings of a
batch: row i of ``a`` and ``b`` is a pair, ``negative`` (optional) a wrong partner per row,
``labels`` the pairs' 0/1 labels, ``head`` the model's head (cosine when None).
"""

from __future__ import annotations

from torch import nn

from ..errors import ConfigError
from ..heads import CosineHead

SIMILARITY_HEADS = ("cosine", "manhattan")  # weight-free: score every pair of a batch at once
PROBABILITY_HEADS = ("manhattan", "l1", "concat", "symmetric")  # scores in [0, 1]


class PairLoss(nn.Module):
    """Base class. ``trains_on`` is "positives" (duplicates only; the other rows of a batch are
    the negatives), "labelled" (both labels) or "pairs" (every pair, labels unused); ``heads``
    lists the heads it makes sense with."""

    trains_on = "positives"
    heads: tuple[str, ...] = SIMILARITY_HEADS
    heads_why: str | None = None  # why other heads are refused, when the general reasons do not say it
    uses_teacher = False  # True: called with teacher=(teacher vectors per side) as well
    default_margin: float | None = None

    def __init__(self, margin: float | None = None):
        super().__init__()
        self.margin = self.default_margin if margin is None else margin

    @staticmethod
    def head_or_cosine(head: nn.Module | None) -> nn.Module:
        return CosineHead() if head is None else head


def check_head_and_loss(head: str, loss: str, losses: dict) -> None:
    """Refuse a head/loss pair that cannot train, with a one-line reason."""
    if loss not in losses:
        raise ConfigError(f"unknown loss {loss!r}; choose one of: {', '.join(losses)}")
    allowed = losses[loss].heads
    if head in allowed:
        return
    if losses[loss].heads_why:
        why = losses[loss].heads_why
    elif head in SIMILARITY_HEADS:
        why = f"head {head!r} gives a similarity, not a probability; use --loss contrastive (labelled pairs) or an in-batch loss"
    else:
        why = f"head {head!r} is a classifier trained on labelled pairs; use --loss bce"
    raise ConfigError(f"loss {loss!r} works with heads {', '.join(allowed)}: {why}")
