"""Encoders turn a padded batch of token ids into one vector per text.

Every encoder subclasses :class:`~.base.Encoder`: ``forward(ids, lengths) -> (n, dim)``, a ``dim``
attribute, keyword hyper-parameters, and its capabilities declared as class attributes (which
width keyword ``--dim`` sets, whether it brings its own tokenizer, takes GloVe vectors, word
counts or character n-grams, its default learning rate, ...). It is built from the model config
by :func:`build_encoder`. A new encoder is a new small module registered here.
"""

from __future__ import annotations

from ...errors import ConfigError, ModelError
from ..pretrained import default_model_path
from .base import Encoder
from .bilstm import BiLSTMEncoder
from .bilstm_max import BiLSTMMaxEncoder
from .bow import BagOfWordsEncoder
from .cnn import CNNEncoder
from .lstm import LSTMEncoder
from .onnx import OnnxEncoder
from .transformer import TransformerEncoder

ENCODERS: dict[str, type[Encoder]] = {
    "lstm": LSTMEncoder,
    "bilstm": BiLSTMEncoder,
    "bilstm-max": BiLSTMMaxEncoder,
    "cnn": CNNEncoder,
    "bow": BagOfWordsEncoder,
    "transformer": TransformerEncoder,
    "onnx": OnnxEncoder,  # an exported model (siamese export): inference only
}


def encoder_class(name: str) -> type[Encoder]:
    try:
        return ENCODERS[name]
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; choose one of: {', '.join(ENCODERS)}") from None


def build_encoder(name: str, vocab_size: int, **options) -> Encoder:
    cls = encoder_class(name)
    try:
        return cls(vocab_size=vocab_size, **options)
    except TypeError as e:  # an option this encoder does not take
        raise ConfigError(f"encoder {name!r}: {e}") from None


def default_lr(name: str) -> float:
    return encoder_class(name).default_lr


__all__ = [
    "ENCODERS",
    "BagOfWordsEncoder",
    "Encoder",
    "BiLSTMEncoder",
    "BiLSTMMaxEncoder",
    "CNNEncoder",
    "LSTMEncoder",
    "OnnxEncoder",
    "TransformerEncoder",
    "build_encoder",
    "default_lr",
    "default_model_path",
    "encoder_class",
]
