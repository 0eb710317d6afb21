"""The seed's Siamese branch: Embedding → LSTM (all steps) → mean over real tokens → L2 norm."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..text import PAD_ID


class LSTMEncoder(nn.Module):
    """Embedding(vocab, dim) → LSTM(dim) → masked mean → unit vector.

    Batches are right-padded, so the LSTM's outputs at real positions never see a pad: the
    masked mean is exact without packing. Large batches are cut into ``length_groups`` groups of
    similar length, each padded only to its own longest text (nearly the saving of packed
    sequences, while keeping the fast fused oneDNN LSTM kernel). ``sparse_embedding`` gives the
    embedding sparse gradients: only the rows of the batch are touched by the optimiser.
    """

    def __init__(self, vocab_size: int, dim: int = 128, sparse_embedding: bool = True, length_groups: int = 2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID, sparse=sparse_embedding)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.dim = dim
        self.length_groups = length_groups

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        groups = min(self.length_groups, len(ids) // 256)  # groups under ~256 rows lose more to small matmuls than they save
        if groups <= 1:
            return self._encode(ids, lengths)
        order = torch.argsort(lengths)
        parts = [self._encode(ids[rows, : int(lengths[rows].max())], lengths[rows]) for rows in order.tensor_split(groups)]
        return torch.cat(parts)[torch.argsort(order)]

    def _encode(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embedding(ids))
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        total = (states * mask.unsqueeze(-1).to(states.dtype)).sum(1, dtype=torch.float32)
        return F.normalize(total / lengths.clamp(min=1).unsqueeze(-1), dim=-1)
