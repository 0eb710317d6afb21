"""Bag of words: a frequency-weighted mean of word vectors (SIF, Arora et al. 2017; SWEM, Shen
et al. 2018) — no word order, but every word keeps its identity, rare ones most of all.

With ``ngrams=2`` word pairs count too, hashed into ``buckets`` vectors of their own (fastText's
trick): a bag of bigrams tells "from X to Y" from "from Y to X". A pair's weight is the geometric
mean of its two words' weights. ``window=k`` takes every ordered pair of words up to k apart
("X … Y", not only "X Y"): a rewording that inserts a word keeps most of them, a swap of two
words flips them. ``pair_mix=m`` pools the pairs apart from the words, each part unit length, and
concatenates ``[words, m · pairs]``: the cosine of two texts is then ``(cos_words + m² ·
cos_pairs) / (1 + m²)`` whatever their lengths (without it, one mean over words and pairs).

With the vectorizer's ``char_ngrams``, each word's character n-grams (ids from ``vocab_size -
char_buckets`` on) are pooled the same way, apart from the words, and joined as ``char_mix ·
chars``: a word seen only in another form ("diabetic", "diabetes") or misspelt still overlaps.

Each word's weight starts at ``a / (a + p(word))`` from its frequency in the training texts (so
"the" counts for little, a rare name for a lot, as in TF-IDF) and is learned from there, like
the vectors. Untrained, the cosine of two such means is already a TF-IDF-like overlap score;
training moves words that mean the same closer together.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...data.vocabulary import PAD_ID, UNK_ID
from ...errors import ConfigError
from .base import Encoder
from .common import finish, init_embedding, padding_mask


class BagOfWordsEncoder(Encoder):
    takes_glove = True
    takes_word_counts = True  # SIF weights from corpus frequencies
    takes_char_ngrams = True
    default_lr = 0.01  # unit-variance vectors move slowly at Adam's usual 1e-3

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 300,
        word_counts=None,
        smoothing: float = 1e-3,
        ngrams: int = 1,
        buckets: int = 1 << 17,
        bigram_weight: float = 1.0,
        window: int = 1,
        pair_mix: float | None = None,
        char_buckets: int = 0,
        char_mix: float = 1.0,
        embeddings=None,
        trainable_embeddings: bool = True,
        normalize: bool = True,
    ):
        super().__init__()
        if ngrams not in (1, 2):
            raise ConfigError(f"ngrams must be 1 or 2, got {ngrams!r}")
        if buckets < 1 or not bigram_weight > 0 or not smoothing > 0:
            raise ConfigError("buckets, bigram_weight and smoothing must be positive")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"window must be a whole number >= 1 (1: adjacent words), got {window!r}")
        if pair_mix is not None and not pair_mix > 0:
            raise ConfigError(f"pair_mix must be positive, got {pair_mix!r}")
        if not char_mix > 0 or not 0 <= char_buckets < vocab_size:
            raise ConfigError(
                f"char_mix must be positive and char_buckets below vocab_size, got {char_mix!r}, {char_buckets!r}"
            )
        if ngrams == 1 and (window != 1 or pair_mix is not None):
            raise ConfigError("window and pair_mix shape the word pairs: use them with ngrams=2")
        self.embedding = init_embedding(
            vocab_size, embedding_dim, embeddings, trainable=trainable_embeddings, sparse=True
        )
        if embeddings is None:  # unit-variance random vectors: near-orthogonal, so overlap is what counts at first
            with torch.no_grad():
                self.embedding.weight.normal_()
                self.embedding.weight[PAD_ID] = 0
        self.log_weight = nn.Embedding(vocab_size, 1, sparse=True)  # log of each word's weight in the mean
        # Words and n-grams weighed each against their own kind: n-grams outnumber words ~10 to 1.
        words = vocab_size - char_buckets
        self.char_start = words if char_buckets else None
        log_w = np.concatenate(
            [
                sif_log_weights(None if word_counts is None else word_counts[:words], words, smoothing),
                sif_log_weights(
                    None if word_counts is None else word_counts[words:], char_buckets, smoothing, unknown=False
                ),
            ]
        )
        with torch.no_grad():
            self.log_weight.weight.copy_(torch.as_tensor(log_w)[:, None])
        self.bigrams = None
        if ngrams == 2:
            # A bag: sums the weighted pair vectors without materialising (n, pairs, dim).
            self.bigrams = nn.EmbeddingBag(buckets, embedding_dim, mode="sum", sparse=True)
            nn.init.normal_(self.bigrams.weight)
        self.buckets = buckets
        self.bigram_log_weight = float(np.log(bigram_weight))
        self.window, self.pair_mix, self.char_mix = window, pair_mix, char_mix
        self.pooling = "weighted mean"  # for summary()
        self.normalize = normalize
        self.dim = embedding_dim * (1 + (pair_mix is not None) + bool(char_buckets))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = padding_mask(ids, lengths)
        # Each distinct id looked up once: the sparse gradients then hold one row per id, not
        # one per token (n-grams repeat a lot within a batch).
        distinct, inverse = torch.unique(ids, return_inverse=True)
        table = self.embedding(distinct)
        log_w = self.log_weight(distinct).squeeze(-1)[inverse]
        weights = log_w.exp() * mask
        chars = None
        if self.char_start is not None:  # the n-grams follow the words: split there
            is_char = ids >= self.char_start
            chars = F.embedding_bag(inverse, table, per_sample_weights=weights * is_char, mode="sum")
            mask = mask & ~is_char
            words = int(mask.sum(1).max())  # the words' columns (shorter texts' n-grams start earlier: masked)
            ids, inverse, log_w, mask = ids[:, :words], inverse[:, :words], log_w[:, :words], mask[:, :words]
            weights = weights[:, :words] * mask
        vectors = F.embedding_bag(inverse, table, per_sample_weights=weights, mode="sum")
        total = weights.sum(1, keepdim=True)
        pairs, pair_total = self._pairs(ids, log_w, mask) if self.bigrams is not None else (None, None)
        if self.pair_mix is None and pairs is not None:  # one mean over words and pairs
            vectors, total = vectors + pairs, total + pair_total
        if self.pair_mix is None and chars is None:
            return finish(vectors / total.clamp(min=1e-9), self.normalize)
        parts = [F.normalize(vectors, dim=-1)]
        if self.pair_mix is not None:
            parts.append(self.pair_mix * F.normalize(torch.zeros_like(vectors) if pairs is None else pairs, dim=-1))
        if chars is not None:
            parts.append(self.char_mix * F.normalize(chars, dim=-1))
        return finish(torch.cat(parts, 1), self.normalize)

    def pool_flat(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor | None:
        if self.bigrams is not None or self.char_start is not None:
            return None  # pairs and n-grams are found per padded row
        offsets = torch.zeros_like(lengths)
        torch.cumsum(lengths[:-1], 0, out=offsets[1:])
        weights = self.log_weight.weight[ids, 0].exp()
        vectors = F.embedding_bag(ids, self.embedding.weight, offsets, per_sample_weights=weights, mode="sum")
        total = torch.zeros(len(lengths), dtype=weights.dtype, device=weights.device)
        total.index_add_(0, torch.repeat_interleave(torch.arange(len(lengths), device=ids.device), lengths), weights)
        return finish(vectors / total.clamp(min=1e-9)[:, None], self.normalize)

    @torch.no_grad()
    def contributions(self, ids: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """Each token's share (float64, one per position of the 1-D ``ids`` of one text) of the
        dot product of this text's unit vector with ``other`` (another text's unit vector): the
        cosine under the cosine head. The unit vector is a sum of weighted token (and word pair)
        vectors over norms that do not depend on ``other``, so the shares sum to the cosine; a
        pair's share is split between its two words. Needs ``normalize`` (the cosine head)."""
        if not self.normalize:
            raise ValueError("contributions decompose a cosine: this encoder returns raw features")
        ids, other = ids.long(), other.double()
        vectors = self.embedding.weight[ids].double()
        log_w = self.log_weight.weight[ids, 0].double()
        weighted = log_w.exp()[:, None] * vectors  # (T, d): each token's term of the pooled sum
        is_char = ids >= self.char_start if self.char_start is not None else torch.zeros_like(ids, dtype=torch.bool)
        words = int((~is_char).sum())  # the words come first, their n-grams after
        pair_terms, pair_owners = self._pair_terms(ids[:words], log_w[:words])
        eps = 1e-12  # F.normalize's floor, as forward() applies it
        shares = torch.zeros(len(ids), dtype=torch.float64, device=ids.device)
        if self.pair_mix is None and self.char_start is None:  # one mean over words (and pairs): the total cancels
            pooled = weighted.sum(0) + pair_terms.sum(0)
            scale = 1 / pooled.norm().clamp(min=eps)
            shares += scale * (weighted @ other)
            shares.index_add_(0, pair_owners.flatten(), (scale * (pair_terms @ other) / 2).repeat_interleave(2))
            return shares
        # Parts pooled apart, each unit length and mixed: [words, pair_mix · pairs, char_mix · chars].
        width = self.embedding.embedding_dim
        pairs_apart = self.pair_mix is not None  # else the pairs join the words' part
        parts = [(weighted[:words].sum(0) + (0 if pairs_apart else pair_terms.sum(0)), 1.0)]
        if pairs_apart:
            parts.append((pair_terms.sum(0), self.pair_mix))
        if self.char_start is not None:
            parts.append((weighted[words:].sum(0), self.char_mix))
        joined = torch.cat([mix * pooled / pooled.norm().clamp(min=eps) for pooled, mix in parts])
        total = joined.norm().clamp(min=eps)
        scale = [mix / pooled.norm().clamp(min=eps) / total for pooled, mix in parts]
        slices = [other[k * width : (k + 1) * width] for k in range(len(parts))]
        shares[:words] += scale[0] * (weighted[:words] @ slices[0])
        pair_part = 1 if pairs_apart else 0
        shares.index_add_(
            0, pair_owners.flatten(), (scale[pair_part] * (pair_terms @ slices[pair_part]) / 2).repeat_interleave(2)
        )
        if self.char_start is not None:
            shares[words:] += scale[-1] * (weighted[words:] @ slices[-1])
        return shares

    def _pair_terms(self, ids: torch.Tensor, log_w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One text's weighted word-pair vectors (P, d) as :meth:`_pairs` pools them, and the two
        word positions of each (P, 2); empty without pairs."""
        width = self.embedding.embedding_dim
        if self.bigrams is None or len(ids) < 2:
            return (
                torch.zeros((0, width), dtype=torch.float64, device=ids.device),
                torch.zeros((0, 2), dtype=torch.long, device=ids.device),
            )
        positions = torch.arange(len(ids), device=ids.device)
        steps = range(1, min(self.window, len(ids) - 1) + 1)
        pair_ids = torch.cat([(ids[:-k] * _PRIME + ids[k:]) % self.buckets for k in steps])
        pair_w = torch.cat([((log_w[:-k] + log_w[k:]) / 2 + self.bigram_log_weight).exp() for k in steps])
        owners = torch.cat([torch.stack([positions[:-k], positions[k:]], 1) for k in steps])
        return pair_w[:, None] * self.bigrams.weight[pair_ids].double(), owners

    def _pairs(self, ids: torch.Tensor, log_w: torch.Tensor, mask: torch.Tensor):
        """Weighted sum of the vectors of the ordered word pairs up to ``window`` apart, and their
        total weight; (None, None) when no text of the batch has two words."""
        steps = range(1, min(self.window, ids.shape[1] - 1) + 1)
        if not steps:
            return None, None
        # Not the distance, only the order: "X … Y" is one pair whether one or three words sit between.
        pair_ids = torch.cat([(ids[:, :-k].long() * _PRIME + ids[:, k:].long()) % self.buckets for k in steps], 1)
        pair_w = torch.cat(
            [((log_w[:, :-k] + log_w[:, k:]) / 2 + self.bigram_log_weight).exp() * mask[:, k:] for k in steps], 1
        )
        return self.bigrams(pair_ids, per_sample_weights=pair_w), pair_w.sum(1, keepdim=True)


_PRIME = 1_000_003  # spreads (first word, second word) id pairs over the buckets


def sif_log_weights(word_counts, vocab_size: int, smoothing: float, unknown: bool = True) -> np.ndarray:
    """``log(a / (a + p(w)))`` per word id; all zeros (a plain mean) without counts. ``unknown``:
    id 1 is [UNK]."""
    if word_counts is None:
        return np.zeros(vocab_size, dtype=np.float32)
    counts = np.array(word_counts, dtype=np.float64)
    if counts.shape != (vocab_size,):
        raise ValueError(f"word_counts has shape {counts.shape}, expected ({vocab_size},)")
    # Two different unknown words share [UNK]'s vector: weigh it as the commonest word, so it
    # does not pass for shared evidence.
    if unknown:
        counts[UNK_ID] = counts.max()
    p = counts / max(counts.sum(), 1.0)
    return np.log(smoothing / (smoothing + p)).astype(np.float32)
