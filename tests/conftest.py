"""Shared fixtures: the public data folder and one small model trained once per session."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from siamese import SiameseModel, TrainConfig, datasets, train
from siamese.data import Pairs

REPO = Path(__file__).resolve().parents[1]

# One intra-op thread: the models here are tiny, and on a 2-core machine OpenMP threads that
# compete with any other busy process make the LSTM 50-100x slower. Results do not depend on it.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared public data sets ($SIAMESE_DATA, else shared/data beside the repository)."""
    root = datasets.data_root(os.environ.get("SIAMESE_DATA") or REPO.parent / "shared" / "data")
    if not datasets.available(root):
        pytest.skip(f"shared data sets not found at {root} (set SIAMESE_DATA to the folder holding them)")
    return root


@dataclass
class Trained:
    model: SiameseModel  # the in-memory model returned by train()
    path: Path  # the same model saved to disk
    train_pairs: Pairs
    val_pairs: Pairs


TRAIN_SETS = ["paws-qqp-train", "msrp-train"]
VAL_SET = "msrp-val"


@pytest.fixture(scope="session")
def trained(data_dir, tmp_path_factory) -> Trained:
    """A small Siamese LSTM: 2 epochs on the duplicates of PAWS-QQP train + MSRP train (~6k pairs)."""
    train_pairs = datasets.load_many(TRAIN_SETS, data_dir)
    val_pairs = datasets.load(VAL_SET, data_dir)
    model = train(train_pairs, val_pairs, config=TrainConfig(epochs=2, seed=0), progress=False)
    path = model.save(tmp_path_factory.mktemp("trained") / "model")
    return Trained(model, path, train_pairs, val_pairs)


@pytest.fixture(scope="session")
def model_path(trained) -> Path:
    return trained.path
