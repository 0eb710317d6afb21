"""The seed's Siamese branch: Embedding → LSTM (all steps) → mean over real tokens → L2 norm."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..text import PAD_ID


class LSTMEncoder(nn.Module):
    """Embedding(vocab, dim) → LSTM(dim) → masked mean → unit vector.

    Batches are right-padded, so the LSTM's outputs at real positions never see a pad: the
    masked mean is exact without packing. ``sparse_embedding`` gives the embedding sparse
    gradients, so the optimiser touches only the rows of the batch.
    """

    def __init__(self, vocab_size: int, dim: int = 128, sparse_embedding: bool = True):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID, sparse=sparse_embedding)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.dim = dim

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embedding(ids))
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        total = (states * mask.unsqueeze(-1).to(states.dtype)).sum(1, dtype=torch.float32)
        return F.normalize(total / lengths.clamp(min=1).unsqueeze(-1), dim=-1)
