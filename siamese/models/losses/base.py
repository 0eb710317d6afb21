"""What every training loss shares: its call signature, what data it trains on, which heads fit.

A loss is called as ``loss(a, b, negative=None, labels=None, head=None)`` on the encodings of a
batch: row i of ``a`` and ``b`` is a pair, ``negative`` (optional) a wrong partner per row,
``labels`` the pairs' 0/1 labels, ``head`` the model's head (cosine when None).
"""

from __future__ import annotations

from torch import nn

from ...config.loss import LossConfig
from ...errors import ConfigError
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
    uses_scores = False  # True: trains on graded scores (STS-B, SICK) where the pairs have them, else the 0/1 labels
    default_margin: float | None = None  # None: this loss has no margin
    default_scale: float | None = None  # None: this loss has no scale

    def __init__(self, margin: float | None = None, scale: float | None = None):
        super().__init__()
        self.margin = self.default_margin if margin is None else margin
        self.scale = self.default_scale if scale is None else scale

    @staticmethod
    def head_or_cosine(head: nn.Module | None) -> nn.Module:
        return CosineHead() if head is None else head


def build_loss(name: str, options: LossConfig | None, losses: dict) -> PairLoss:
    """The loss ``name`` with ``options``, refusing an option it does not have."""
    options = options or LossConfig()
    options.check()
    if name not in losses:
        raise ConfigError(f"unknown loss {name!r}; choose one of: {', '.join(losses)}")
    cls = losses[name]
    for option in ("margin", "scale"):
        if getattr(options, option) is not None and getattr(cls, f"default_{option}") is None:
            have = [o for o in ("margin", "scale") if getattr(cls, f"default_{o}") is not None]
            raise ConfigError(f"loss {name!r} has no {option} (it takes: {', '.join(have) or 'no options'})")
    return cls(margin=options.margin, scale=options.scale)


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
        why = (
            f"head {head!r} gives a similarity, not a probability; use --loss contrastive (labelled pairs) "
            "or an in-batch loss"
        )
    else:
        why = f"head {head!r} is a classifier trained on labelled pairs; use --loss bce"
    raise ConfigError(f"loss {loss!r} works with heads {', '.join(allowed)}: {why}")
