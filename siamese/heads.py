"""Heads turn two encodings into one similarity score per pair: ``score(a, b) -> (n,)``."""

from __future__ import annotations

import torch


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of rows; encoders already return unit vectors, so a row-wise dot product."""
    return (a * b).sum(-1)


HEADS = {"cosine": cosine}
