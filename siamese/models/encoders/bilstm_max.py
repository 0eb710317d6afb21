"""BiLSTM, max-pooled: the text side of the question→emoji model.

Embedding → BiLSTM(hidden, all steps) → max over real tokens (or attention) → Dense(out_dim, relu).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .base import Encoder
from .common import AttentionPooling, bidirectional_states, check_pooling, finish, init_embedding, padding_mask, pool

__all__ = ["BiLSTMMaxEncoder", "bidirectional_states", "init_embedding", "padding_mask"]


class BiLSTMMaxEncoder(Encoder):
    """Embedding(vocab, embedding_dim) → BiLSTM(hidden) → masked max-pool → Dense(out_dim, relu).

    ``embeddings`` (a (vocab, embedding_dim) array) initialises the embedding, e.g. from GloVe.
    ``normalize`` returns unit vectors (the model contract); turn it off to stack more layers.
    ``pooling="attention"`` replaces the max-pool with learned attention over the time steps.
    """

    takes_glove = True

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 50,
        hidden: int = 50,
        out_dim: int = 10,
        embeddings=None,
        trainable_embeddings: bool = True,
        normalize: bool = True,
        pooling: str = "max",
    ):
        super().__init__()
        self.embedding = init_embedding(vocab_size, embedding_dim, embeddings, trainable=trainable_embeddings)
        self.lstm = nn.LSTM(embedding_dim, hidden, batch_first=True, bidirectional=True)
        self.pooling = check_pooling(pooling, ("max", "attention"))
        self.attention = AttentionPooling(2 * hidden) if pooling == "attention" else None
        self.dense = nn.Linear(2 * hidden, out_dim)
        self.normalize = normalize
        self.dim = out_dim

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, _ = bidirectional_states(self.lstm, self.embedding(ids), lengths)
        pooled = pool(states, padding_mask(ids, lengths), self.pooling, self.attention)
        return finish(F.relu(self.dense(pooled)), self.normalize)
