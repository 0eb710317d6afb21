"""Encoders turn a padded batch of token ids into one vector per text.

Every encoder is an ``nn.Module`` with ``forward(ids, lengths) -> (n, dim)``, a ``dim``
attribute, and keyword-only hyper-parameters; it is built from the model config by
:func:`build_encoder`. A new encoder is a new small module registered here. Class attributes
an encoder may set: ``default_lr`` (Adam rate when none is given), ``own_tokenizer`` (it brings
its own tokenizer.json instead of a learned word vocabulary), ``saved_options()`` (extra
keywords config.json must keep to rebuild it), ``exported`` with ``weights_file`` (an exported
model opened from its folder, inference only), ``bf16_inference`` (precision auto encodes in bf16
on CPUs with native bf16).
"""

from __future__ import annotations

from torch import nn

from ..errors import ConfigError, ModelError
from .bilstm import BiLSTMEncoder
from .bilstm_max import BiLSTMMaxEncoder
from .bow import BagOfWordsEncoder
from .cnn import CNNEncoder
from .lstm import LSTMEncoder
from .onnx import OnnxEncoder
from ..pretrained import default_model_path
from .transformer import TransformerEncoder

ENCODERS: dict[str, type[nn.Module]] = {
    "lstm": LSTMEncoder,
    "bilstm": BiLSTMEncoder,
    "bilstm-max": BiLSTMMaxEncoder,
    "cnn": CNNEncoder,
    "bow": BagOfWordsEncoder,
    "transformer": TransformerEncoder,
    "onnx": OnnxEncoder,  # an exported model (siamese export): inference only
}
DEFAULT_LR = 1e-3  # Keras's Adam default, the recipes' choice


def encoder_class(name: str) -> type[nn.Module]:
    try:
        return ENCODERS[name]
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; choose one of: {', '.join(ENCODERS)}") from None


def build_encoder(name: str, vocab_size: int, **options) -> nn.Module:
    cls = encoder_class(name)
    try:
        return cls(vocab_size=vocab_size, **options)
    except TypeError as e:  # an option this encoder does not take
        raise ConfigError(f"encoder {name!r}: {e}") from None


def default_lr(name: str) -> float:
    return getattr(encoder_class(name), "default_lr", DEFAULT_LR)


__all__ = ["ENCODERS", "BagOfWordsEncoder", "BiLSTMEncoder", "BiLSTMMaxEncoder", "CNNEncoder", "LSTMEncoder", "OnnxEncoder", "TransformerEncoder",
           "build_encoder", "default_lr", "default_model_path", "encoder_class"]
