"""Batches of rows for the trainers: shuffled, length-bucketed (far less padding), with repeats
where rows are weighted; shared by the Siamese, cross-encoder and emoji trainers."""

from __future__ import annotations

import numpy as np
import torch


def seed_everything(seed: int) -> np.random.Generator:
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def batches(
    lengths: np.ndarray,
    batch_size: int,
    rng: np.random.Generator,
    *,
    bucket: bool = True,
    span: int = 50,
    rows: np.ndarray | None = None,
    min_rows: int = 2,
) -> list[np.ndarray]:
    """Shuffled index batches; with ``bucket`` each pool of ``span`` batches is sorted by length
    before cutting, so a batch pads to a length close to its texts' own. ``rows`` (default: all)
    are the rows this epoch draws, repeats allowed. A last batch under ``min_rows`` joins the one before."""
    order = rng.permutation(len(lengths)) if rows is None else rng.permutation(rows)
    if bucket:
        pool = batch_size * span
        order = np.concatenate(
            [
                chunk[np.argsort(lengths[chunk], kind="stable")]
                for chunk in np.split(order, range(pool, len(order), pool))
            ]
        )
    out = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if len(out) > 1 and len(out[-1]) < min_rows:  # the in-batch losses need a negative (per worker when sharded)
        out[-2:] = [np.concatenate(out[-2:])]
    rng.shuffle(out)
    return out


def weighted_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One epoch's rows when row i should be drawn ``weights[i]`` times on average: its whole
    part every time, its fraction at random."""
    whole = np.floor(weights).astype(np.int64)
    extra = rng.random(len(weights)) < (weights - whole)
    return np.repeat(np.arange(len(weights)), whole + extra)
