"""The default Siamese branch: Embedding → LSTM (all steps) → mean over real tokens → L2 norm."""

from __future__ import annotations

import torch
from torch import nn

from ...data.vocabulary import PAD_ID
from . import fused_lstm
from .base import Encoder
from .common import AttentionPooling, check_pooling, finish, padding_mask, pool


class LSTMEncoder(Encoder):
    """Embedding(vocab, dim) → LSTM(dim) → masked mean (or attention) → unit vector.

    Batches are right-padded, so the LSTM's outputs at real positions never see a pad: the
    masked pooling is exact without packing. ``sparse_embedding`` gives the embedding sparse
    gradients, so the optimiser touches only the rows of the batch.
    """

    width_option = "dim"  # the LSTM width (the embedding is as wide)
    default_lr = 0.01

    def __init__(
        self,
        vocab_size: int,
        dim: int = 128,
        sparse_embedding: bool = True,
        pooling: str = "mean",
        normalize: bool = True,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID, sparse=sparse_embedding)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.pooling = check_pooling(pooling, ("mean", "attention"))
        self.attention = AttentionPooling(dim) if pooling == "attention" else None
        self.normalize = normalize
        self.dim = dim

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.pooling == "mean" and fused_lstm.usable(self.lstm):  # training in bf16: one fused kernel, same math
            return finish(fused_lstm.mean_states(self.embedding, self.lstm, ids, lengths), self.normalize)
        states, _ = self.lstm(self.embedding(ids))
        return finish(pool(states, padding_mask(ids, lengths), self.pooling, self.attention), self.normalize)
