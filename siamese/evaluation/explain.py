"""Which words of two texts drove their similarity: ``explain_pair(model, a, b)``.

Two methods, named in the result's ``method``:

- ``exact`` (a bag-of-words encoder under the cosine head: ``--encoder bow`` and the distilled
  static student). The text's unit vector is a sum of weighted token vectors divided by a norm,
  so the cosine is a sum of per-token dot products with the other text's unit vector
  (:meth:`siamese.models.encoders.BagOfWordsEncoder.contributions`). A word's weight is its tokens'
  share (its subword pieces, its character n-grams, half of each word pair it is in); each
  text's weights sum to the similarity.
- ``occlusion`` (every other encoder and head): a word's weight is how much the similarity drops
  when the word is deleted from its text (negative: the pair is more alike without it). All the
  shortened texts are encoded in one batch. The weights do not sum to the similarity.

Words are the text's whitespace-separated spans (what a reader sees, with ``start``/``end``
character offsets into the text); tokens map to them through the tokenizer's offsets.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..errors import DataError
from ..models.encoders import BagOfWordsEncoder


@dataclass
class Word:
    word: str
    start: int  # character offsets of the word in its text
    end: int
    weight: float


@dataclass
class Explanation:
    similarity: float
    method: str  # "exact" or "occlusion"
    text1: list[Word]
    text2: list[Word]

    def to_dict(self) -> dict:
        return asdict(self)


def explain_pair(model, text1: str, text2: str, *, similarity: float | None = None) -> Explanation:
    """Per-word weights of both texts for ``model``'s score of the pair (see the module doc).

    ``similarity``: the pair's score as already reported (e.g. by :meth:`similarity` beside it);
    the explanation states that number and weighs the words against it, so one pair never shows
    two similarities (encoding in another batch can move the last digits)."""
    for name, text in (("text1", text1), ("text2", text2)):
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{name} is empty: there is nothing to explain")
    if getattr(model, "kind", None) == "cross":
        return _pair_occlusion(model, text1, text2, similarity)
    if exact_method_applies(model):
        found = _exact(model, text1, text2)
        return found if similarity is None else Explanation(float(similarity), found.method, found.text1, found.text2)
    return _occlusion(model, text1, text2, similarity)


def exact_method_applies(model) -> bool:
    """A bag of words under the cosine head: its similarity decomposes over tokens."""
    return isinstance(model.encoder, BagOfWordsEncoder) and model.config.head == "cosine" and model.encoder.normalize


def words_of(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


# -- exact ---------------------------------------------------------------------------------------


@torch.inference_mode()
def _exact(model, text1: str, text2: str) -> Explanation:
    model.encoder.eval()
    ids = model.vectorizer.encode([text1, text2])
    # The same float32 vectors similarity() compares (exact pooling is fp32 on every CPU).
    unit = torch.from_numpy(model.encode([text1, text2], precision="fp32")).double().to(model.device)
    sides = []
    for text, row, other in ((text1, ids[0], unit[1]), (text2, ids[1], unit[0])):
        row = torch.from_numpy(row.astype(np.int64)).to(model.device)
        per_token = model.encoder.contributions(row, other).cpu().numpy()
        sides.append(_words_with_weights(text, _token_words(model.vectorizer, text, len(row)), per_token))
    return Explanation(float(unit[0] @ unit[1]), "exact", *sides)


def _token_words(vectorizer, text: str, n_tokens: int) -> list[list[int]]:
    """For each token position of ``vectorizer.encode([text])``: the indices of the words (of
    :func:`words_of`) it belongs to (one; all of them for a token no word covers, such as the
    [UNK] of a text with no known characters)."""
    words = words_of(text)
    starts = np.array([s for _, s, _ in words])
    encoding = vectorizer.tokenizer.encode(text, add_special_tokens=vectorizer.add_special_tokens)
    owners = []
    for start, end in encoding.offsets:
        # special tokens have empty spans: they belong to the whole text
        owners.append(
            [int(np.searchsorted(starts, start, side="right") - 1)] if end > start else list(range(len(words)))
        )
    # each word token's character n-grams follow the words, word by word
    for owner, count in zip(list(owners), vectorizer.ngrams_per_word(text, len(encoding.ids))):
        owners += [owner] * count
    if not owners:  # no known characters: the text's one token is [UNK]
        owners = [list(range(len(words)))]
    if len(owners) != n_tokens:
        raise AssertionError(f"{len(owners)} token owners for {n_tokens} tokens")  # the tokenizer and encode() disagree
    return owners


def _words_with_weights(text: str, owners: list[list[int]], per_token: np.ndarray) -> list[Word]:
    words = words_of(text)
    weights = np.zeros(len(words))
    for share, owner in zip(per_token, owners):
        weights[owner] += share / len(owner)
    return [Word(w, s, e, float(x)) for (w, s, e), x in zip(words, weights)]


# -- occlusion -----------------------------------------------------------------------------------


@torch.inference_mode()
def _occlusion(model, text1: str, text2: str, similarity: float | None = None) -> Explanation:
    words1, words2 = words_of(text1), words_of(text2)
    shortened1 = [_without(text1, s, e) for _, s, e in words1]
    shortened2 = [_without(text2, s, e) for _, s, e in words2]
    # One encode call for every text: length-sorted batches, the model's own precision.
    vectors = torch.from_numpy(model.encode([text1, text2, *shortened1, *shortened2]))
    a, b = vectors[:1], vectors[1:2]
    rest1, rest2 = vectors[2 : 2 + len(words1)], vectors[2 + len(words1) :]
    full = float(model.score(a, b)[0]) if similarity is None else float(similarity)
    drop1 = full - model.score(rest1, b.expand(len(rest1), -1))
    drop2 = full - model.score(a.expand(len(rest2), -1), rest2)
    return Explanation(
        full,
        "occlusion",
        [Word(w, s, e, float(x)) for (w, s, e), x in zip(words1, drop1)],
        [Word(w, s, e, float(x)) for (w, s, e), x in zip(words2, drop2)],
    )


def _pair_occlusion(model, text1: str, text2: str, similarity: float | None = None) -> Explanation:
    """Occlusion for a model that scores pairs only (a cross-encoder): every shortened pair in one call."""
    words1, words2 = words_of(text1), words_of(text2)
    firsts = [text1] + [_without(text1, s, e) for _, s, e in words1] + [text1] * len(words2)
    seconds = [text2] * (1 + len(words1)) + [_without(text2, s, e) for _, s, e in words2]
    scores = model.similarity_pairwise(firsts, seconds)
    full = float(scores[0]) if similarity is None else float(similarity)
    drops = full - scores[1:]
    return Explanation(
        full,
        "occlusion",
        [Word(w, s, e, float(x)) for (w, s, e), x in zip(words1, drops)],
        [Word(w, s, e, float(x)) for (w, s, e), x in zip(words2, drops[len(words1) :])],
    )


def _without(text: str, start: int, end: int) -> str:
    """The text with one word (and the space after it) deleted."""
    while end < len(text) and text[end].isspace():
        end += 1
    return text[:start] + text[end:]
