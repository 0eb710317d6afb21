"""siamese: train, evaluate and serve Siamese neural networks for semantic similarity."""

__version__ = "0.1.0"

from .calibration import Calibrator, fit_calibrator  # noqa: E402
from .data import FORMATS, Pairs, read_pairs, read_texts, split_pairs  # noqa: E402
from .errors import ConfigError, DataError, ModelError, SiameseError  # noqa: E402
from .evaluation import choose_threshold, evaluate  # noqa: E402
from .losses import hinge_loss, triplet_loss  # noqa: E402
from .model import ModelConfig, SiameseModel  # noqa: E402
from .sentence_encoder import from_pretrained  # noqa: E402
from .training import TrainConfig, train  # noqa: E402
from .vectors import encode_to_file, write_vectors  # noqa: E402

__all__ = [
    "FORMATS", "Calibrator", "ConfigError", "DataError", "ModelConfig", "ModelError", "Pairs", "SiameseError", "SiameseModel",
    "TrainConfig", "choose_threshold", "encode_to_file", "evaluate", "fit_calibrator", "from_pretrained", "read_pairs",
    "read_texts", "split_pairs", "train", "hinge_loss", "triplet_loss", "write_vectors",
]
