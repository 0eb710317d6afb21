"""MPNet in plain PyTorch (all-mpnet-base-v2's network), so that ``siamese train --from mpnet`` can train
its top layers on cached states as it trains MiniLM's (:mod:`siamese.training.learn`).

The modules and parameter names are those of transformers' ``MPNetModel`` (``embeddings.*``,
``encoder.layer.N.attention.attn.q`` …, ``encoder.relative_attention_bias``), so its safetensors load
into either and trained layers write back into it. It differs from BERT in three places: no token
types, positions counted from ``padding_idx + 1``, and a learned bias per head on the attention scores
for each bucket of relative distance, shared by every layer (:meth:`MPNet.attention_mask` folds it into
the mask the layers take)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

from . import bert
from .bert import _ACTIVATIONS, _Embedding, _LayerNorm, _Linear

PADDING_IDX = 1  # MPNet's <pad>; positions start after it


def supports(hf_config: dict) -> bool:
    """Whether :class:`MPNet` reproduces the model this Hugging Face config describes."""
    return (
        hf_config.get("model_type") == "mpnet"
        and hf_config.get("hidden_act", "gelu") in _ACTIVATIONS
        and hf_config.get("hidden_size", 0) % max(1, hf_config.get("num_attention_heads", 1)) == 0
    )


def relative_buckets(length: int, buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """(length, length) bucket of each key's distance from each query, as MPNet (and T5) count them:
    half the buckets per direction, exact up to a quarter of them, then logarithmic up to ``max_distance``."""
    position = torch.arange(length)
    n = -(position[None, :] - position[:, None])  # query − key
    half = buckets // 2
    ret = (n < 0).long() * half
    n = n.abs()
    exact = half // 2
    large = exact + (torch.log(n.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (half - exact)).long()
    return ret + torch.where(n < exact, n, large.clamp(max=half - 1))


class _Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = _Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = _Embedding(c.max_position_embeddings, c.hidden_size)
        self.LayerNorm = _LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # right-padded texts: token i sits at position PADDING_IDX + 1 + i (padding's own rows are masked out)
        positions = torch.arange(ids.shape[1], device=ids.device) + PADDING_IDX + 1
        x = F.embedding(ids, self.word_embeddings.weight, padding_idx=PADDING_IDX)
        return self.dropout(self.LayerNorm(x + self.position_embeddings.weight[positions]))


class _SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.dropout = c.num_attention_heads, c.attention_probs_dropout_prob
        self.q = _Linear(c.hidden_size, c.hidden_size)
        self.k = _Linear(c.hidden_size, c.hidden_size)
        self.v = _Linear(c.hidden_size, c.hidden_size)
        self.o = _Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.o(bert.attend(x, self.q, self.k, self.v, self.heads, bias, self.dropout if self.training else 0.0))


class _Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn = _SelfAttention(c)  # MPNetModel's names
        self.LayerNorm = _LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.attn(x, bias)) + x)


class _Encoder(bert._Encoder):
    def __init__(self, c):
        super().__init__(c, _Attention)
        self.relative_attention_bias = _Embedding(c.relative_attention_num_buckets, c.num_attention_heads)


class MPNet(nn.Module):
    """``MPNetModel``'s forward for ``input_ids`` and ``attention_mask`` (right-padded): ``last_hidden_state``.
    Its parameters are allocated, not initialised: the caller loads them all."""

    def __init__(self, hf_config: dict, *, pooler: bool = False):
        super().__init__()
        if pooler:
            raise ValueError("MPNet here has no pooler (sentence encoders mean-pool)")
        defaults = {"layer_norm_eps": 1e-5, "hidden_act": "gelu", "relative_attention_num_buckets": 32}
        defaults |= {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
        self.config = c = SimpleNamespace(**(defaults | hf_config))
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)

    def attention_mask(self, keep: torch.Tensor) -> torch.Tensor:
        """What every layer adds to its attention scores, (batch, heads, tokens, tokens): the relative
        position bias, and −inf at padded keys (``keep``: (batch, tokens), True at real tokens)."""
        buckets = relative_buckets(keep.shape[1], self.config.relative_attention_num_buckets).to(keep.device)
        bias = self.encoder.relative_attention_bias.weight[buckets].permute(2, 0, 1)[None]  # (1, heads, t, t)
        padded = torch.zeros(keep.shape, dtype=bias.dtype, device=keep.device).masked_fill(~keep, float("-inf"))
        return bias + padded[:, None, None, :]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        bias = self.attention_mask(attention_mask.bool())
        x = self.embeddings(input_ids)
        for layer in self.encoder.layer:
            x = layer(x, bias)
        return SimpleNamespace(last_hidden_state=x, pooler_output=None)
