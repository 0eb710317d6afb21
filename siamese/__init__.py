"""siamese: train, evaluate and serve Siamese neural networks for semantic similarity.

The public API below is imported lazily: ``import siamese`` has no side effects and imports no
torch until one of these names is used."""

from __future__ import annotations

from ._lazy import lazy_exports
from .version import __version__

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "Deduplicated": ".api",
        "dedupe": ".api",
        "Calibrator": ".calibrator",
        "fit_calibrator": ".calibration",
        "FORMATS": ".data",
        "Pairs": ".data",
        "read_pairs": ".data",
        "read_texts": ".data",
        "split_pairs": ".data",
        "ConfigError": ".errors",
        "DataError": ".errors",
        "ModelError": ".errors",
        "SiameseError": ".errors",
        "choose_threshold": ".thresholds",
        "evaluate": ".evaluation",
        "hinge_loss": ".losses",
        "triplet_loss": ".losses",
        "ModelConfig": ".model",
        "SiameseModel": ".model",
        "from_pretrained": ".sentence_encoder",
        "TrainConfig": ".training",
        "train": ".training",
        "encode_to_file": ".vectors",
        "write_vectors": ".vectors",
    },
)
__all__ = [*__all__, "__version__"]
