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
import re
import zlib
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import chain

import numpy as np
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from tokenizers.trainers import WordLevelTrainer

from ..errors import ConfigError, ModelError

# ASCII control characters BERT's normalizer drops (tab, newline and return are whitespace there).
_ASCII_CONTROLS = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127])

_WORD_CACHE_SIZE = 1 << 20  # words whose ids are kept (cleared when full: a bound on memory)

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

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        oov_buckets: int = 0,
        char_ngrams: Sequence[int] | None = None,
        char_buckets: int = 0,
    ):
        # A special token typed into a text ("[SEP]", "[PAD]") is text, on every path (see _ids).
        tokenizer.encode_special_tokens = True
        self.tokenizer = tokenizer
        self.oov_buckets = check_oov_buckets(oov_buckets)
        self.char_ngrams = check_char_ngrams(char_ngrams, char_buckets)
        self.char_buckets = int(char_buckets) if self.char_ngrams else 0
        self._words = tokenizer.get_vocab_size()  # the first bucket's id

    def _encode_batch(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's ids for each text (see :meth:`_ids`)."""
        flat, lengths = self._ids(texts)
        out, at = [], 0
        for n in lengths:
            out.append(flat[at : at + n])
            at += n
        return out

    def _ids(self, texts: list[str]) -> tuple[list[int], list[int]]:
        """Every text's token ids end to end, and how many each text has. With BERT's normalizer,
        ASCII texts skip it: they are normalised here (lower case, control characters out) and,
        where the tokenizer splits words apart and at punctuation (BertPreTokenizer) and adds
        nothing around them, each word's ids come from a cache (a text is then a few dictionary
        look-ups: ~3x the tokenizer's speed); otherwise a twin tokenizer without the normalizer
        takes them (~1.5x). The same ids as the tokenizer's; a special token typed into a text
        ("[SEP]") is text on both (``encode_special_tokens``). tests/data/test_text.py checks both."""
        special = self.add_special_tokens
        twin = self._ascii_twin()
        if twin is None:
            return _joined(e.ids for e in self.tokenizer.encode_batch_fast(texts, add_special_tokens=special))
        fast, lowercase, words = twin
        is_ascii = [t.isascii() for t in texts]
        cleaned = [t.translate(_ASCII_CONTROLS) for t, a in zip(texts, is_ascii) if a]
        if lowercase:
            cleaned = [t.lower() for t in cleaned]
        apart = {}  # rows tokenised as a batch: the non-ASCII ones, and without a word cache all
        if not all(is_ascii):
            others = [i for i, a in enumerate(is_ascii) if not a]
            encoded = self.tokenizer.encode_batch_fast([texts[i] for i in others], add_special_tokens=special)
            apart.update(zip(others, (e.ids for e in encoded)))
        if words is None:
            encoded = fast.encode_batch_fast(cleaned, add_special_tokens=special)
            apart.update(zip((i for i, a in enumerate(is_ascii) if a), (e.ids for e in encoded)))
            return _joined(apart[i] for i in range(len(texts)))
        split, limit, keep_last = words
        cache = self._word_ids
        if len(cache) > _WORD_CACHE_SIZE:
            cache.clear()
        lookup, join = cache.__getitem__, chain.from_iterable
        flat: list[int] = []
        lengths: list[int] = []
        extend = flat.extend
        next_ascii = iter(cleaned).__next__
        for i, a in enumerate(is_ascii):
            at = len(flat)
            if not a:
                extend(apart[i])
            else:
                found = split(next_ascii())
                try:
                    extend(join(map(lookup, found)))
                except KeyError:  # a word not seen yet: the tokenizer's ids for it, kept
                    del flat[at:]
                    for w in found:
                        if w not in cache:
                            cache[w] = fast.encode(w, add_special_tokens=False).ids
                    extend(join(map(lookup, found)))
                if limit and len(flat) - at > limit:  # truncation, as the tokenizer's
                    if keep_last:
                        del flat[at : len(flat) - limit]
                    else:
                        del flat[at + limit :]
            lengths.append(len(flat) - at)
        return flat, lengths

    def _ascii_twin(self):
        """(the tokenizer without its BertNormalizer, whether that lower-cased, the word cache's
        (split, truncate) or None), rebuilt when the tokenizer or its truncation/padding settings
        change; None for any other normalizer."""
        tok = self.tokenizer
        key = (id(tok), repr(tok.truncation), repr(tok.padding))
        if getattr(self, "_twin_of", None) == key:
            return self._twin
        spec = json.loads(tok.to_str())
        norm = spec.get("normalizer") or {}
        twin = None
        if norm.get("type") == "BertNormalizer" and norm.get("clean_text", True):
            spec["normalizer"] = None
            lowercase = bool(norm.get("lowercase", True))
            fast = Tokenizer.from_str(json.dumps(spec))
            fast.encode_special_tokens = tok.encode_special_tokens  # not in the JSON
            twin = (
                fast,
                lowercase,
                _word_split(spec, lowercase, self.add_special_tokens),
            )
        self._twin_of, self._twin, self._word_ids = key, twin, {}
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
    def load(
        cls,
        path: str | os.PathLike,
        *,
        oov_buckets: int = 0,
        char_ngrams: Sequence[int] | None = None,
        char_buckets: int = 0,
    ) -> Vectorizer:
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
            return [np.asarray(ids, dtype=np.int32) if ids else unk for ids in encodings]
        out = []
        for text, ids in zip(texts, encodings):
            # The fast encoding keeps no offsets: find the words again, only where needed.
            words = self._words_of(text) if self.char_ngrams or UNK_ID in ids else None
            if self.oov_buckets and UNK_ID in ids:
                first, k = self._words, self.oov_buckets
                ids = [first + _crc(words[j]) % k if i == UNK_ID else i for j, i in enumerate(ids)]
            if self.char_ngrams and ids:
                lo, hi = self.char_ngrams
                ids = ids + [
                    g for w in words[: len(ids)] for g in _char_ids(w, lo, hi, self.char_start, self.char_buckets)
                ]
            out.append(np.asarray(ids, dtype=np.int32) if ids else unk)
        return out

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode`'s ids joined end to end (int64) and each text's count, for encoders that
        pool without padding (Encoder.pool_flat)."""
        texts = texts if isinstance(texts, list) else list(texts)
        if self.oov_buckets or self.char_ngrams:
            rows = self.encode(texts)
            return np.concatenate(rows).astype(np.int64), np.fromiter(map(len, rows), np.int64, len(rows))
        flat, counts = self._ids(texts)
        ids, lengths = np.array(flat, dtype=np.int64), np.array(counts, dtype=np.int64)
        empty = lengths == 0
        if empty.any():  # an empty text is [UNK], as in encode()
            ids = np.insert(ids, (np.cumsum(lengths) - lengths)[empty], UNK_ID)
            lengths[empty] = 1
        return ids, lengths

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
        return (
            sorted(vocab, key=vocab.__getitem__)
            + [f"[OOV {i}]" for i in range(self.oov_buckets)]
            + [f"[CHAR {i}]" for i in range(self.char_buckets)]
        )


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
            raise ModelError(
                f"{path}: no padding token (the file sets none, and it has neither {' nor '.join(_PAD_TOKENS)})"
            )
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


def _word_split(spec: dict, lowercase: bool, special: bool):
    """(split, max_length or 0, whether truncation keeps the last ids) for the word cache when a
    normalised ASCII text's ids are exactly its words' ids joined: BertPreTokenizer (for ASCII:
    runs of letters and digits, and each other printable character alone), a model that takes
    each word alone, nothing added around the text, and no added token that could match
    lower-cased text. None otherwise."""
    pre, model = spec.get("pre_tokenizer") or {}, spec.get("model") or {}
    if pre.get("type") != "BertPreTokenizer" or model.get("type") not in ("WordPiece", "WordLevel"):
        return None
    if (special and spec.get("post_processor")) or spec.get("padding"):
        return None
    if not lowercase or any(t["content"] == t["content"].lower() for t in spec.get("added_tokens", [])):
        return None
    cut = spec.get("truncation") or {}
    return re.compile(r"[a-z0-9]+|[^\sa-z0-9]").findall, cut.get("max_length") or 0, cut.get("direction") == "Left"


def _joined(rows: Iterable[list[int]]) -> tuple[list[int], list[int]]:
    flat: list[int] = []
    lengths = []
    for ids in rows:
        flat += ids
        lengths.append(len(ids))
    return flat, lengths


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
    if not (
        isinstance(value, (list, tuple)) and len(value) == 2 and all(map(_whole, value)) and 1 <= value[0] <= value[1]
    ):
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
    return tuple(
        first + _crc(marked[i : i + n]) % buckets for n in range(lo, hi + 1) for i in range(len(marked) - n + 1)
    )


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
