"""Encoders turn a padded batch of token ids into one unit vector per text.

Every encoder is an ``nn.Module`` with ``forward(ids, lengths) -> (n, d)`` and is built from the
model config by :func:`build_encoder`; a new encoder is a new small module registered here.
"""

from __future__ import annotations

from torch import nn

from ..errors import ModelError
from .bilstm_max import BiLSTMMaxEncoder
from .lstm import LSTMEncoder

ENCODERS: dict[str, type[nn.Module]] = {"lstm": LSTMEncoder, "bilstm-max": BiLSTMMaxEncoder}


def build_encoder(name: str, vocab_size: int, **options) -> nn.Module:
    try:
        cls = ENCODERS[name]
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; choose one of: {', '.join(ENCODERS)}") from None
    return cls(vocab_size=vocab_size, **options)


__all__ = ["ENCODERS", "BiLSTMMaxEncoder", "LSTMEncoder", "build_encoder"]
