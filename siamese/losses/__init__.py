"""Losses: each takes encodings (and labels where it needs them) and returns a scalar tensor."""

from .hinge import HingeLoss, hinge_loss
from .triplet import TripletLoss, triplet_loss

LOSSES = {"triplet": TripletLoss}

__all__ = ["LOSSES", "HingeLoss", "TripletLoss", "hinge_loss", "triplet_loss"]
