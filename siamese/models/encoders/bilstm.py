"""BiLSTM, last states: the Keras "Siamese recipes" encoder.

Embedding (optionally GloVe-initialised, trainable) → Bidirectional LSTM(hidden) → the final
forward and backward states concatenated (2·hidden). Packed sequences keep padding out of both
directions. ``pooling`` swaps the final states for mean, max or attention over all steps.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import Encoder
from .common import AttentionPooling, bidirectional_states, check_pooling, finish, init_embedding, padding_mask, pool


class BiLSTMEncoder(Encoder):
    takes_glove = True

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 128,
        hidden: int = 256,
        pooling: str = "last",
        embeddings=None,
        trainable_embeddings: bool = True,
        normalize: bool = True,
    ):
        super().__init__()
        self.embedding = init_embedding(vocab_size, embedding_dim, embeddings, trainable=trainable_embeddings)
        self.lstm = nn.LSTM(embedding_dim, hidden, batch_first=True, bidirectional=True)
        self.pooling = check_pooling(pooling, ("last", "mean", "max", "attention"))
        self.attention = AttentionPooling(2 * hidden) if pooling == "attention" else None
        self.normalize = normalize
        self.dim = 2 * hidden

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, hidden = bidirectional_states(self.lstm, self.embedding(ids), lengths)
        if self.pooling == "last":  # hidden[-2] = forward at the last real token, hidden[-1] = backward at the first
            out = torch.cat([hidden[-2], hidden[-1]], -1).float()
        else:
            out = pool(states, padding_mask(ids, lengths), self.pooling, self.attention)
        return finish(out, self.normalize)
