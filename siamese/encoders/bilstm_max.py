"""BiLSTM, max-pooled: the text side of the question→emoji model.

Embedding → BiLSTM(hidden, all steps) → max over real tokens → Dense(out_dim, relu) → L2 norm.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..text import PAD_ID


def init_embedding(vocab_size: int, embedding_dim: int, embeddings=None, *, trainable: bool = True) -> nn.Embedding:
    """An embedding layer with padding id 0, optionally starting from a (vocab, dim) matrix
    (for example :func:`siamese.glove.embedding_matrix`)."""
    layer = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)
    if embeddings is not None:
        weights = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
        if weights.shape != (vocab_size, embedding_dim):
            raise ValueError(f"embedding matrix is {tuple(weights.shape)}, expected ({vocab_size}, {embedding_dim})")
        with torch.no_grad():
            layer.weight.copy_(weights)
    layer.weight.requires_grad_(trainable)
    return layer


def bidirectional_states(lstm: nn.LSTM, embedded: torch.Tensor, lengths: torch.Tensor):
    """Run a bidirectional LSTM on right-padded input with packing, so the backward direction
    starts at each text's last real token rather than at the padding. Returns
    ``(states (n, T, 2h), final hidden (layers*2, n, h))``."""
    packed = pack_padded_sequence(embedded, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    out, (hidden, _) = lstm(packed)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=embedded.shape[1])
    return states, hidden


def padding_mask(ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(n, T) True at real tokens."""
    return torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]


class BiLSTMMaxEncoder(nn.Module):
    """Embedding(vocab, embedding_dim) → BiLSTM(hidden) → masked max-pool → Dense(out_dim, relu).

    ``embeddings`` (a (vocab, embedding_dim) array) initialises the embedding, e.g. from GloVe.
    ``normalize`` returns unit vectors (the model contract); turn it off to stack more layers.
    """

    def __init__(self, vocab_size: int, embedding_dim: int = 50, hidden: int = 50, out_dim: int = 10,
                 embeddings=None, trainable_embeddings: bool = True, normalize: bool = True):
        super().__init__()
        self.embedding = init_embedding(vocab_size, embedding_dim, embeddings, trainable=trainable_embeddings)
        self.lstm = nn.LSTM(embedding_dim, hidden, batch_first=True, bidirectional=True)
        self.dense = nn.Linear(2 * hidden, out_dim)
        self.normalize = normalize
        self.dim = out_dim

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, _ = bidirectional_states(self.lstm, self.embedding(ids), lengths)
        # Padding can never win the max: push it to -inf before pooling.
        states = states.masked_fill(~padding_mask(ids, lengths).unsqueeze(-1), float("-inf"))
        out = F.relu(self.dense(states.max(1).values))
        return F.normalize(out, dim=-1) if self.normalize else out
