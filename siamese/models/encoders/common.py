"""Pieces the word-level encoders share: an embedding that can start from GloVe, masks, a packed
bidirectional LSTM, and pooling over real tokens (mean, max or learned attention)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ...data.vocabulary import PAD_ID
from ...errors import ConfigError


def init_embedding(
    vocab_size: int, embedding_dim: int, embeddings=None, *, trainable: bool = True, sparse: bool = False
) -> nn.Embedding:
    """An embedding layer with padding id 0, optionally starting from a (vocab, dim) matrix
    (for example :func:`siamese.data.glove.embedding_matrix`)."""
    layer = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID, sparse=sparse)
    if embeddings is not None:
        weights = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
        if weights.shape != (vocab_size, embedding_dim):
            raise ValueError(f"embedding matrix is {tuple(weights.shape)}, expected ({vocab_size}, {embedding_dim})")
        with torch.no_grad():
            layer.weight.copy_(weights)
    layer.weight.requires_grad_(trainable)
    return layer


def padding_mask(ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(n, T) True at real tokens."""
    return torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]


def bidirectional_states(lstm: nn.LSTM, embedded: torch.Tensor, lengths: torch.Tensor):
    """Run a bidirectional LSTM on right-padded input with packing, so the backward direction
    starts at each text's last real token rather than at the padding. Returns
    ``(states (n, T, 2h), final hidden (layers*2, n, h))``."""
    packed = pack_padded_sequence(embedded, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    out, (hidden, _) = lstm(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=embedded.shape[1])
    return states, hidden


class AttentionPooling(nn.Module):
    """Additive attention over time steps (Yang et al. 2016): ``softmax(v · tanh(W h_t))``
    over real tokens, then the weighted sum of the states."""

    def __init__(self, width: int, attention_dim: int = 64):
        super().__init__()
        self.project = nn.Linear(width, attention_dim)
        self.score = nn.Linear(attention_dim, 1, bias=False)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.score(torch.tanh(self.project(states))).squeeze(-1)
        weights = torch.softmax(scores.float().masked_fill(~mask, float("-inf")), dim=1)
        return (weights.unsqueeze(-1) * states.float()).sum(1)


POOLINGS = ("mean", "max", "attention")


def check_pooling(pooling: str, allowed: tuple[str, ...]) -> str:
    if pooling not in allowed:
        raise ConfigError(f"pooling must be one of {', '.join(allowed)}, got {pooling!r}")
    return pooling


def pool(
    states: torch.Tensor, mask: torch.Tensor, pooling: str, attention: AttentionPooling | None = None
) -> torch.Tensor:
    """Reduce (n, T, w) states to (n, w) over the real tokens only."""
    if pooling == "mean":
        total = (states * mask.unsqueeze(-1).to(states.dtype)).sum(1, dtype=torch.float32)
        return total / mask.sum(1, keepdim=True).clamp(min=1)
    if pooling == "max":  # padding can never win the max
        return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(1).values.float()
    return attention(states, mask)


def finish(vectors: torch.Tensor, normalize: bool) -> torch.Tensor:
    """Unit vectors for the cosine head; raw features for the others."""
    return F.normalize(vectors, dim=-1) if normalize else vectors
