"""Losses, one short file each (see :mod:`.base` for the shared call signature).

Which head each loss makes sense with (others are refused by :func:`check_head_and_loss`):

=============  ==================  ================================================
loss           trains on           heads
=============  ==================  ================================================
triplet        duplicates          cosine, manhattan (in-batch hard negatives)
hinge          duplicates/triplets cosine, manhattan (every in-batch wrong answer)
mnr            duplicates          cosine, manhattan (in-batch softmax)
contrastive    labelled pairs      cosine, manhattan (distance = 1 − score)
cosent         graded/labelled     cosine, manhattan (orders pairs by gold score)
bce            labelled pairs      manhattan, l1, concat, symmetric (probabilities)
distill        any pairs + teacher cosine (all in-batch scores → the teacher's cosines)
=============  ==================  ================================================
"""

from functools import partial

from .base import LossConfig, PairLoss, build_loss, check_head_and_loss
from .bce import BCELoss
from .contrastive import ContrastiveLoss
from .cosent import CoSENTLoss
from .distill import DistillLoss
from .hinge import HingeLoss, hinge_loss
from .mnr import MultipleNegativesRankingLoss
from .triplet import TripletLoss, triplet_loss

LOSSES: dict[str, type[PairLoss]] = {
    "triplet": TripletLoss,
    "hinge": HingeLoss,
    "mnr": MultipleNegativesRankingLoss,
    "contrastive": ContrastiveLoss,
    "cosent": CoSENTLoss,
    "bce": BCELoss,
    "distill": DistillLoss,
}
check_head_and_loss = partial(check_head_and_loss, losses=LOSSES)


def _defaults(option: str) -> str:
    """Each loss's default ``option`` (the help of --margin / --scale), from the loss classes."""
    have = {name: getattr(cls, f"default_{option}") for name, cls in LOSSES.items()}
    listed = ", ".join(f"{value:g} {name}" for name, value in have.items() if value is not None)
    return f"Default: {listed}; the other losses have none."


def margins() -> str:
    return _defaults("margin")


def scales() -> str:
    return _defaults("scale")


build_loss = partial(build_loss, losses=LOSSES)

__all__ = [
    "LOSSES",
    "BCELoss",
    "LossConfig",
    "build_loss",
    "CoSENTLoss",
    "ContrastiveLoss",
    "DistillLoss",
    "HingeLoss",
    "MultipleNegativesRankingLoss",
    "PairLoss",
    "TripletLoss",
    "check_head_and_loss",
    "hinge_loss",
    "triplet_loss",
]
