"""Word vocabulary learned from the data, on the Hugging Face ``tokenizers`` WordLevel model.

Behaves like Keras ``TextVectorization(split='whitespace', standardize='strip_punctuation')``:
ASCII punctuation is removed, text is split on whitespace, words are ranked by frequency.
Id 0 is padding and id 1 the out-of-vocabulary word. Saved as a standard ``tokenizer.json``.

With ``oov_buckets=k`` (Keras ``num_oov_indices``), a word outside the vocabulary is hashed
(CRC-32 of its UTF-8 form: the same id in every process and platform) into one of ``k`` ids
after the vocabulary instead of becoming ``[UNK]``: two texts sharing an unseen name or term
then share an id. ``k`` is not in ``tokenizer.json`` (a standard file); the model's
``config.json`` keeps it.

With ``char_ngrams=(lo, hi)`` each word's character n-grams (of ``<word>``, fastText's word
boundaries) follow the text's words as ids of their own, hashed the same way into
``char_buckets`` ids after the buckets: "hypertension" and "hypertensive", or a misspelt
"recieve", then share most of their ids. Only the bag of words pools them (apart from the words).
"""

from __future__ import annotations

import json
import os
import zlib
from functools import lru_cache
from collections.abc import Iterable, Sequence

import numpy as np
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from tokenizers.trainers import WordLevelTrainer

from .errors import ConfigError, ModelError

# ASCII control characters BERT's normalizer drops (tab, newline and return are whitespace there).
_ASCII_CONTROLS = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127])

PAD, UNK = "[PAD]", "[UNK]"
PAD_ID, UNK_ID = 0, 1
# The characters Keras strips with standardize='strip_punctuation' (string.punctuation).
_PUNCTUATION = Regex(r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]""")
# Whitespace that Python's str.split() splits on but the tokenizer's WhitespaceSplit does not.
_PYTHON_ONLY_SPACES = "\x1c\x1d\x1e\x1f"


class Vectorizer:
    """Text → token ids. Fit on training texts with :meth:`fit`, or load a ``tokenizer.json``."""

    add_special_tokens = False
    pad_id = PAD_ID  # what batches are padded with (a pretrained tokenizer has its own)

    def __init__(self, tokenizer: Tokenizer, *, oov_buckets: int = 0, char_ngrams: Sequence[int] | None = None,
                 char_buckets: int = 0):
        self.tokenizer = tokenizer
        self.oov_buckets = check_oov_buckets(oov_buckets)
        self.char_ngrams = check_char_ngrams(char_ngrams, char_buckets)
        self.char_buckets = int(char_buckets) if self.char_ngrams else 0
        self._words = tokenizer.get_vocab_size()  # the first bucket's id

    def _encode_batch(self, texts: list[str]) -> list:
        """The tokenizer's encodings of ``texts``. With BERT's normalizer, ASCII texts take a
        twin tokenizer without it, normalised here instead (same ids; the tokenizer ~1.5x faster:
        the normalizer's Unicode passes are a third of a short text's tokenisation time)."""
        twin = self._ascii_twin()
        if twin is None:
            return self.tokenizer.encode_batch_fast(texts, add_special_tokens=self.add_special_tokens)
        fast, lowercase = twin
        ascii_rows, others = [], []
        for i, t in enumerate(texts):
            (ascii_rows if t.isascii() else others).append(i)
        out = [None] * len(texts)
        if others:
            for i, e in zip(others, self.tokenizer.encode_batch_fast([texts[i] for i in others],
                                                                     add_special_tokens=self.add_special_tokens)):
                out[i] = e
        cleaned = [texts[i].translate(_ASCII_CONTROLS) for i in ascii_rows]
        encoded = fast.encode_batch_fast([t.lower() for t in cleaned] if lowercase else cleaned,
                                         add_special_tokens=self.add_special_tokens)
        for i, e in zip(ascii_rows, encoded):
            out[i] = e
        return out

    def _ascii_twin(self) -> tuple[Tokenizer, bool] | None:
        """(the tokenizer without its BertNormalizer, whether that lower-cased), rebuilt when the
        tokenizer or its truncation/padding settings change; None for any other normalizer."""
        tok = self.tokenizer
        key = (id(tok), repr(tok.truncation), repr(tok.padding))
        if getattr(self, "_twin_of", None) == key:
            return self._twin
        spec = json.loads(tok.to_str())
        norm = spec.get("normalizer") or {}
        twin = None
        if norm.get("type") == "BertNormalizer" and norm.get("clean_text", True):
            spec["normalizer"] = None
            twin = (Tokenizer.from_str(json.dumps(spec)), bool(norm.get("lowercase", True)))
        self._twin_of, self._twin = key, twin
        return twin

    @property
    def word_count(self) -> int:
        """Ids of vocabulary words (the special tokens included), before any bucket."""
        return self._words

    @property
    def char_start(self) -> int:
        """The first character n-gram id (= :attr:`vocab_size` without n-grams)."""
        return self._words + self.oov_buckets

    @classmethod
    def fit(
        cls,
        texts: Iterable[str],
        *,
        max_vocab: int | None = 50_000,
        min_frequency: int = 1,
        lowercase: bool = True,
        max_length: int | None = 128,
        oov_buckets: int = 0,
        char_ngrams: Sequence[int] | None = None,
        char_buckets: int = 0,
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
        return cls(tok, oov_buckets=oov_buckets, char_ngrams=char_ngrams, char_buckets=char_buckets)

    @classmethod
    def load(cls, path: str | os.PathLike, *, oov_buckets: int = 0, char_ngrams: Sequence[int] | None = None,
             char_buckets: int = 0) -> Vectorizer:
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad files
            raise ModelError(f"{path}: not a readable tokenizer.json ({e})") from None
        if tok.token_to_id(PAD) != PAD_ID or tok.token_to_id(UNK) != UNK_ID:
            raise ModelError(f"{path}: expected {PAD} at id 0 and {UNK} at id 1")
        return cls(tok, oov_buckets=oov_buckets, char_ngrams=char_ngrams, char_buckets=char_buckets)

    def save(self, path: str | os.PathLike) -> None:
        self.tokenizer.save(str(path))

    @property
    def vocab_size(self) -> int:
        """Number of ids: the words, the out-of-vocabulary buckets, the character n-gram buckets."""
        return self._words + self.oov_buckets + self.char_buckets

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text (int32): its words, then (with ``char_ngrams``) their n-grams. A
        text with no known characters becomes ``[UNK]``."""
        texts = texts if isinstance(texts, list) else list(texts)
        encodings = self._encode_batch(texts)
        unk = np.array([UNK_ID], dtype=np.int32)
        if not self.oov_buckets and not self.char_ngrams:
            return [np.asarray(e.ids, dtype=np.int32) if e.ids else unk for e in encodings]
        out = []
        for text, e in zip(texts, encodings):
            ids = e.ids
            # The fast encoding keeps no offsets: find the words again, only where needed.
            words = self._words_of(text) if self.char_ngrams or UNK_ID in ids else None
            if self.oov_buckets and UNK_ID in ids:
                first, k = self._words, self.oov_buckets
                ids = [first + _crc(words[j]) % k if i == UNK_ID else i for j, i in enumerate(ids)]
            if self.char_ngrams and ids:
                lo, hi = self.char_ngrams
                ids = ids + [g for w in words[: len(ids)] for g in _char_ids(w, lo, hi, self.char_start, self.char_buckets)]
            out.append(np.asarray(ids, dtype=np.int32) if ids else unk)
        return out

    def ngrams_per_word(self, text: str, words: int) -> list[int]:
        """How many character n-gram ids each of the text's first ``words`` word tokens adds
        after the words in :meth:`encode` (all 0 without ``char_ngrams``)."""
        if not self.char_ngrams:
            return [0] * words
        lo, hi = self.char_ngrams
        return [len(_char_ids(w, lo, hi, self.char_start, self.char_buckets)) for w in self._words_of(text)[:words]]

    def _words_of(self, text: str) -> list[str]:
        """The words of the normalised text. WordLevel gives one id per whitespace-split word
        (truncation keeps the first ones), so they line up with the ids."""
        normalizer = self.tokenizer.normalizer
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        if any(c in normalized for c in _PYTHON_ONLY_SPACES):  # rare: split exactly as the tokenizer does
            return [w for w, _ in self.tokenizer.pre_tokenizer.pre_tokenize_str(normalized)]
        return normalized.split()  # ~20x faster than pre_tokenize_str

    def counts(self, texts: Iterable[str]) -> np.ndarray:
        """How often each token id occurs in ``texts`` (int64, one entry per id)."""
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        texts, step = list(texts), 1 << 16
        for start in range(0, len(texts), step):  # in chunks: a million texts never sit as ids at once
            ids = self.encode(texts[start : start + step])
            counts += np.bincount(np.concatenate(ids), minlength=self.vocab_size)
        return counts

    def vocabulary(self) -> list[str]:
        """A name per id, in id order: the words, ``[OOV i]`` per bucket, ``[CHAR i]`` per n-gram bucket."""
        vocab = self.tokenizer.get_vocab()
        return (sorted(vocab, key=vocab.__getitem__) + [f"[OOV {i}]" for i in range(self.oov_buckets)]
                + [f"[CHAR {i}]" for i in range(self.char_buckets)])


class PretrainedVectorizer(Vectorizer):
    """A pretrained model's own ``tokenizer.json`` (e.g. BERT WordPiece with [CLS] … [SEP]).

    Padding is ours (per batch), so the file's fixed-length padding is switched off; its padding
    token gives :attr:`pad_id` (BERT's ``[PAD]`` is 0, MPNet's and RoBERTa's ``<pad>`` 1), and
    :meth:`save` writes it back so a saved model pads the same way.
    """

    add_special_tokens = True

    def __init__(self, tokenizer: Tokenizer, pad_id: int = PAD_ID, pad_token: str = PAD):
        super().__init__(tokenizer)
        self.pad_id, self.pad_token = pad_id, pad_token

    @classmethod
    def load(cls, path: str | os.PathLike, max_length: int | None = 128) -> PretrainedVectorizer:
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad files
            raise ModelError(f"{path}: not a readable tokenizer.json ({e})") from None
        pad_token, pad_id = padding_token(tok)
        if pad_id is None:
            raise ModelError(f"{path}: no padding token (the file sets none, and it has neither {' nor '.join(_PAD_TOKENS)})")
        tok.no_padding()
        if max_length:
            tok.enable_truncation(max_length)
        return cls(tok, pad_id, pad_token)

    def save(self, path: str | os.PathLike) -> None:
        # A copy with the padding token set (batch-longest): the file stays a complete Hugging
        # Face tokenizer, and load() finds the same pad id again (the vocabulary may also hold an
        # unused "[PAD]" elsewhere, as MPNet's does).
        tok = Tokenizer.from_str(self.tokenizer.to_str())
        tok.enable_padding(pad_id=self.pad_id, pad_token=self.pad_token)
        tok.save(str(path))

    @classmethod
    def fit(cls, *args, **kwargs):
        raise TypeError("a pretrained tokenizer is loaded, not fitted")


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_oov_buckets(value) -> int:
    """A count of out-of-vocabulary buckets: an integer >= 0."""
    if not _whole(value) or value < 0:
        raise ConfigError(f"oov_buckets must be a whole number >= 0 (0: unknown words are [UNK]), got {value!r}")
    return int(value)


def check_char_ngrams(value, buckets) -> tuple[int, int] | None:
    """``(lo, hi)`` n-gram lengths, 1 <= lo <= hi, with at least one bucket; None: no n-grams."""
    if value is None:
        return None
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(map(_whole, value)) and 1 <= value[0] <= value[1]):
        raise ConfigError(f"char_ngrams must be two lengths lo <= hi, both >= 1 (e.g. 3-5), got {value!r}")
    if not _whole(buckets) or buckets < 1:
        raise ConfigError(f"char_buckets must be a whole number >= 1, got {buckets!r}")
    return int(value[0]), int(value[1])


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())  # the same in every process and platform, unlike hash()


@lru_cache(maxsize=1 << 18)  # words repeat: each distinct one is cut up once
def _char_ids(word: str, lo: int, hi: int, first: int, buckets: int) -> tuple[int, ...]:
    """Ids of the character n-grams of ``<word>``, lo to hi characters long."""
    marked = f"<{word}>"
    return tuple(first + _crc(marked[i : i + n]) % buckets for n in range(lo, hi + 1) for i in range(len(marked) - n + 1))


# Padding tokens to look for when a tokenizer.json does not name one: BERT's, then RoBERTa/MPNet's.
_PAD_TOKENS = (PAD, "<pad>")


def padding_token(tok: Tokenizer) -> tuple[str, int | None]:
    """The tokenizer's padding token and its id: the one its padding settings name, else one of
    :data:`_PAD_TOKENS` in its vocabulary, a special token first (MPNet's vocabulary holds a
    plain "[PAD]" at id 4 besides its special "<pad>" at 1); id None when there is none."""
    if tok.padding:
        return tok.padding["pad_token"], tok.token_to_id(tok.padding["pad_token"])
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    found = sorted((t for t in _PAD_TOKENS if tok.token_to_id(t) is not None), key=lambda t: t not in special)
    return (found[0], tok.token_to_id(found[0])) if found else (PAD, None)


def pad(sequences: Sequence[np.ndarray], pad_id: int = PAD_ID) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad id sequences with ``pad_id`` (a vectorizer's :attr:`~Vectorizer.pad_id`);
    return ``(ids (n, T), lengths (n,))``."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    ids = np.full((len(sequences), int(lengths.max(initial=1))), pad_id, dtype=np.int64)
    for row, seq in zip(ids, sequences):
        row[: len(seq)] = seq
    return ids, lengths
