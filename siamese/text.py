"""Word vocabulary learned from the data, on the Hugging Face ``tokenizers`` WordLevel model.

Behaves like Keras ``TextVectorization(split='whitespace', standardize='strip_punctuation')``:
ASCII punctuation is removed, text is split on whitespace, words are ranked by frequency.
Id 0 is padding and id 1 the out-of-vocabulary word. Saved as a standard ``tokenizer.json``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from tokenizers.trainers import WordLevelTrainer

from .errors import ModelError

PAD, UNK = "[PAD]", "[UNK]"
PAD_ID, UNK_ID = 0, 1
# The characters Keras strips with standardize='strip_punctuation' (string.punctuation).
_PUNCTUATION = Regex(r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]""")


class Vectorizer:
    """Text → token ids. Fit on training texts with :meth:`fit`, or load a ``tokenizer.json``."""

    add_special_tokens = False

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer

    @classmethod
    def fit(
        cls,
        texts: Iterable[str],
        *,
        max_vocab: int | None = 50_000,
        min_frequency: int = 1,
        lowercase: bool = True,
        max_length: int | None = 128,
    ) -> Vectorizer:
        steps = [normalizers.Replace(_PUNCTUATION, "")]
        if lowercase:
            steps.append(normalizers.Lowercase())
        tok = Tokenizer(WordLevel(unk_token=UNK))
        tok.normalizer = normalizers.Sequence(steps)
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        trainer = WordLevelTrainer(
            vocab_size=max_vocab or 10**9,
            min_frequency=min_frequency,
            special_tokens=[PAD, UNK],
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer)
        if max_length:
            tok.enable_truncation(max_length)
        return cls(tok)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vectorizer:
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad files
            raise ModelError(f"{path}: not a readable tokenizer.json ({e})") from None
        if tok.token_to_id(PAD) != PAD_ID or tok.token_to_id(UNK) != UNK_ID:
            raise ModelError(f"{path}: expected {PAD} at id 0 and {UNK} at id 1")
        return cls(tok)

    def save(self, path: str | os.PathLike) -> None:
        self.tokenizer.save(str(path))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text (int32). A text with no known characters becomes ``[UNK]``."""
        encodings = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=self.add_special_tokens)
        unk = np.array([UNK_ID], dtype=np.int32)
        return [np.asarray(e.ids, dtype=np.int32) if e.ids else unk for e in encodings]

    def counts(self, texts: Iterable[str]) -> np.ndarray:
        """How often each token id occurs in ``texts`` (int64, one entry per id)."""
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        texts, step = list(texts), 1 << 16
        for start in range(0, len(texts), step):  # in chunks: a million texts never sit as ids at once
            ids = self.encode(texts[start : start + step])
            counts += np.bincount(np.concatenate(ids), minlength=self.vocab_size)
        return counts

    def vocabulary(self) -> list[str]:
        vocab = self.tokenizer.get_vocab()
        return sorted(vocab, key=vocab.__getitem__)


class PretrainedVectorizer(Vectorizer):
    """A pretrained model's own ``tokenizer.json`` (e.g. BERT WordPiece with [CLS] … [SEP]).

    Padding is ours (per batch, id 0), so the file's fixed-length padding is switched off.
    """

    add_special_tokens = True

    @classmethod
    def load(cls, path: str | os.PathLike, max_length: int | None = 128) -> PretrainedVectorizer:
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad files
            raise ModelError(f"{path}: not a readable tokenizer.json ({e})") from None
        pad_token = (tok.padding or {}).get("pad_token", PAD)
        if tok.token_to_id(pad_token) != PAD_ID:
            raise ModelError(f"{path}: the padding token {pad_token} must have id {PAD_ID}")
        tok.no_padding()
        if max_length:
            tok.enable_truncation(max_length)
        return cls(tok)

    @classmethod
    def fit(cls, *args, **kwargs):
        raise TypeError("a pretrained tokenizer is loaded, not fitted")


def pad(sequences: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad id sequences with :data:`PAD_ID`; return ``(ids (n, T), lengths (n,))``."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    ids = np.zeros((len(sequences), int(lengths.max(initial=1))), dtype=np.int64)
    for row, seq in zip(ids, sequences):
        row[: len(seq)] = seq
    return ids, lengths
