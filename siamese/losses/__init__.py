"""Losses: each takes encodings (and labels where it needs them) and returns a scalar tensor."""

from .triplet import TripletLoss, triplet_loss

LOSSES = {"triplet": TripletLoss}

__all__ = ["LOSSES", "TripletLoss", "triplet_loss"]
