"""siamese: train, evaluate and serve Siamese neural networks for semantic similarity.

The public API below is imported lazily: ``import siamese`` imports no torch until one of these
names is used. Its one side effect is OpenMP's wait policy, set before torch loads."""

from __future__ import annotations

import os
import sys

# OpenMP threads that spin while they wait burn the cores they wait for when other processes share them: two
# Python processes encoding with MiniLM on a 2-core machine each took 22x longer than with waiting threads asleep
# (the `siamese` command sets the same in siamese/cli/root.py). Read once, when torch loads; a user's own wins.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from ._lazy import lazy_exports
from .version import __version__

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "Deduplicated": ".search.in_memory",
        "dedupe": ".search.in_memory",
        "Calibrator": ".decision.calibrator",
        "fit_calibrator": ".decision.calibration",
        "calibrate": ".decision.calibration",
        "FORMATS": ".data.pairs",
        "Pairs": ".data.pairs",
        "read_pairs": ".data.pairs",
        "read_texts": ".data.pairs",
        "split_pairs": ".data.pairs",
        "datasets": ".data.datasets",
        "ConfigError": ".errors",
        "DataError": ".errors",
        "ModelError": ".errors",
        "SiameseError": ".errors",
        "choose_threshold": ".decision.threshold",
        "verify_pairs": ".decision.cascade",
        "labelled_band": ".decision.cascade",
        "evaluate": ".evaluation.metrics",
        "score_file": ".evaluation.scoring",
        "hinge_loss": ".models.losses",
        "triplet_loss": ".models.losses",
        "ModelConfig": ".config.configs",
        "SiameseModel": ".models.siamese",
        "from_pretrained": ".models.sentence_encoder",
        "TrainConfig": ".config.configs",
        "train": ".training.bi_encoder",
        "learn": ".training.learn",
        "LearnOptions": ".training.learn",
        "encode_to_file": ".search.vectors",
        "write_vectors": ".search.vectors",
    },
)
__all__ = [*__all__, "__version__"]
