"""BERT in plain PyTorch, for rebuilding a saved BERT-family encoder (all-MiniLM-L6-v2 among them)
without importing Hugging Face transformers, whose import alone took ~1.2 s of the ~3.8 s a
`siamese predict` on a MiniLM folder cost on 2 cores.

The modules and parameter names are those of transformers' ``BertModel`` (``embeddings.*``,
``encoder.layer.N.attention.self.query`` …, ``pooler.dense``), so the same safetensors load
into either, strictly, and a model's fingerprint does not depend on which one runs it. Only the
plain encoder is covered (absolute positions, GELU, no decoder or cross-attention): any other
configuration goes through transformers (:func:`supports`)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "gelu_new": lambda x: F.gelu(x, approximate="tanh")}


def supports(hf_config: dict) -> bool:
    """Whether :class:`Bert` reproduces the model this Hugging Face config describes."""
    return (
        hf_config.get("model_type") == "bert"
        and hf_config.get("position_embedding_type", "absolute") == "absolute"
        and hf_config.get("hidden_act", "gelu") in _ACTIVATIONS
        and not hf_config.get("is_decoder", False)
        and not hf_config.get("add_cross_attention", False)
        and hf_config.get("hidden_size", 0) % max(1, hf_config.get("num_attention_heads", 1)) == 0
    )


class _Linear(nn.Module):
    """nn.Linear's parameters and forward, left uninitialised (see :meth:`Bert.init_weights`)."""

    def __init__(self, fan_in: int, fan_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
        self.bias = nn.Parameter(torch.empty(fan_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class _LayerNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width))
        self.bias = nn.Parameter(torch.empty(width))
        self.shape, self.eps = (width,), eps  # a constant shape: ONNX export traces it as one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.shape, self.weight, self.bias, self.eps)


class _Embedding(nn.Module):
    def __init__(self, rows: int, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, width))


class _Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = _Embedding(c.vocab_size, c.hidden_size)
        self.pad_id = c.pad_token_id
        self.position_embeddings = _Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = _Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = _LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, ids: torch.Tensor, types: torch.Tensor | None = None) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        words = F.embedding(ids, self.word_embeddings.weight, padding_idx=self.pad_id)  # no gradient to padding
        segments = self.token_type_embeddings.weight[0] if types is None else self.token_type_embeddings.weight[types]
        # BertModel's order of the sums: the same floats
        x = words + segments + self.position_embeddings.weight[positions]
        return self.dropout(self.LayerNorm(x))


class _SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.dropout = c.num_attention_heads, c.attention_probs_dropout_prob
        self.query = _Linear(c.hidden_size, c.hidden_size)
        self.key = _Linear(c.hidden_size, c.hidden_size)
        self.value = _Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return attend(x, self.query, self.key, self.value, self.heads, keep, self.dropout if self.training else 0.0)


def attend(x: torch.Tensor, query, key, value, heads: int, mask: torch.Tensor, dropout: float) -> torch.Tensor:
    """Multi-head scaled dot-product attention of ``x`` (batch, tokens, width) through its three projections;
    ``mask``: boolean (keys to attend to) or float (added to the scores). Shared with mpnet.py."""
    b, t, d = x.shape

    def split(layer) -> torch.Tensor:  # (batch, heads, tokens, head width)
        return layer(x).view(b, t, heads, d // heads).transpose(1, 2)

    q = split(query)
    if mask.is_floating_point():  # SDPA wants a float mask in the queries' dtype (bf16 under autocast)
        mask = mask.to(q.dtype)
    out = F.scaled_dot_product_attention(
        q, split(key), split(value), attn_mask=mask, dropout_p=dropout, scale=1 / math.sqrt(d // heads)
    )
    return out.transpose(1, 2).reshape(b, t, d)


class _Output(nn.Module):
    """dense → dropout → LayerNorm(· + residual): after attention and after the feed-forward."""

    def __init__(self, c, width: int):
        super().__init__()
        self.dense = _Linear(width, c.hidden_size)
        self.LayerNorm = _LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class _Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = _SelfAttention(c)  # BertModel's name for it
        self.output = _Output(c, c.hidden_size)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, keep), x)


class _Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = _Linear(c.hidden_size, c.intermediate_size)
        self.activation = _ACTIVATIONS[c.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x))


class _Layer(nn.Module):
    """attention → feed-forward; ``attention``: the attention block's class (MPNet's differs: mpnet.py)."""

    def __init__(self, c, attention: type[nn.Module] = _Attention):
        super().__init__()
        self.attention = attention(c)
        self.intermediate = _Intermediate(c)
        self.output = _Output(c, c.intermediate_size)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, keep)
        return self.output(self.intermediate(x), x)


class _Encoder(nn.Module):
    def __init__(self, c, attention: type[nn.Module] = _Attention):
        super().__init__()
        self.layer = nn.ModuleList(_Layer(c, attention) for _ in range(c.num_hidden_layers))


class _Pooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = _Linear(c.hidden_size, c.hidden_size)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(states[:, 0]))


class Bert(nn.Module):
    """``BertModel``'s forward for ``input_ids`` and ``attention_mask``: ``last_hidden_state`` and
    ``pooler_output``. Its parameters are allocated, not initialised: the caller loads them all,
    strictly, or calls :meth:`init_weights` (initialising on the meta device, or through nn.Linear's
    own reset, cost ~1 s of start-up: it imports torch._dynamo)."""

    def __init__(self, hf_config: dict, *, pooler: bool = True):
        super().__init__()
        defaults = {"pad_token_id": 0, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "type_vocab_size": 2}
        defaults |= {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
        self.config = c = SimpleNamespace(**(defaults | hf_config))
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)
        self.pooler = _Pooler(c) if pooler else None  # BertModel(add_pooling_layer=False): none

    @torch.no_grad()
    def init_weights(self) -> Bert:
        """BERT's initialisation: weights ~ N(0, 0.02), biases 0, LayerNorm scale 1."""
        for module in self.modules():
            if isinstance(module, _LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
            elif isinstance(module, (_Linear, _Embedding)):
                module.weight.normal_(0.0, 0.02)
                if isinstance(module, _Linear):
                    module.bias.zero_()
        return self

    def attention_mask(self, keep: torch.Tensor) -> torch.Tensor:
        """The mask every layer takes: the keys each query may attend to (``keep``: (batch, tokens), True at
        real tokens)."""
        return keep[:, None, None, :]

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> SimpleNamespace:
        keep = self.attention_mask(attention_mask.bool())
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.encoder.layer:
            x = layer(x, keep)
        return SimpleNamespace(last_hidden_state=x, pooler_output=self.pooler(x) if self.pooler else None)
