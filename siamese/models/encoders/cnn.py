"""CNN encoder for answer selection (Feng et al. 2015): Embedding → 1-D convolutions of several
widths → max-pool over time → tanh, the widths' features concatenated."""

from __future__ import annotations

import torch
from torch import nn

from .base import Encoder
from .common import finish, init_embedding


class CNNEncoder(Encoder):
    takes_glove = True

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 128,
        filters: int = 256,
        kernel_sizes: tuple[int, ...] | list[int] = (2, 3),
        embeddings=None,
        trainable_embeddings: bool = True,
        normalize: bool = True,
    ):
        super().__init__()
        self.embedding = init_embedding(vocab_size, embedding_dim, embeddings, trainable=trainable_embeddings)
        # "Wide" convolutions (padding k-1 each side) so a one-word text still has k windows.
        self.convs = nn.ModuleList(nn.Conv1d(embedding_dim, filters, k, padding=k - 1) for k in kernel_sizes)
        self.kernel_sizes = tuple(kernel_sizes)
        self.normalize = normalize
        self.dim = filters * len(self.kernel_sizes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids).transpose(1, 2)  # (n, emb, T)
        pooled = []
        for k, conv in zip(self.kernel_sizes, self.convs):
            y = conv(x)  # (n, filters, T + k - 1); window j covers tokens j-k+1 .. j
            real = torch.arange(y.shape[2], device=ids.device)[None, :] < (lengths + k - 1)[:, None]
            pooled.append(y.masked_fill(~real.unsqueeze(1), float("-inf")).max(2).values)
        return finish(torch.tanh(torch.cat(pooled, 1)), self.normalize)
