"""Vectorizer: Keras strip_punctuation-like standardisation, frequency-ranked ids, persistence; pad()."""

from __future__ import annotations

import json
import string
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from siamese import ModelError
from siamese.data.vocabulary import PAD, PAD_ID, UNK, UNK_ID, PretrainedVectorizer, Vectorizer, pad


def ids(v: Vectorizer, text: str) -> list[int]:
    return v.encode([text])[0].tolist()


def words(v: Vectorizer, text: str) -> list[str]:
    vocab = v.vocabulary()
    return [vocab[i] for i in ids(v, text)]


def test_special_ids():
    v = Vectorizer.fit(["a b c"])
    assert (PAD_ID, UNK_ID) == (0, 1)
    assert v.vocabulary()[:2] == [PAD, UNK]
    assert v.tokenizer.token_to_id(PAD) == PAD_ID and v.tokenizer.token_to_id(UNK) == UNK_ID


def test_strips_every_ascii_punctuation_character():
    text = f"wo{string.punctuation}rd"
    v = Vectorizer.fit([text, "don't stop-me now!"])
    assert "word" in v.vocabulary()
    assert words(v, text) == ["word"]
    assert words(v, "Don't, stop-me... NOW?!") == ["dont", "stopme", "now"]
    assert not any(c in string.punctuation for w in v.vocabulary()[2:] for c in w)


def test_non_ascii_punctuation_is_kept_like_keras():
    v = Vectorizer.fit(["¿qué tal? «bien» — sí"])
    assert {"¿qué", "tal", "«bien»", "—", "sí"} <= set(v.vocabulary())


def test_lowercases_by_default_and_keeps_case_when_asked():
    texts = ["Hello World", "hello world"]
    lower = Vectorizer.fit(texts)
    assert "Hello" not in lower.vocabulary() and "hello" in lower.vocabulary()
    assert ids(lower, "HELLO") == ids(lower, "hello")
    cased = Vectorizer.fit(texts, lowercase=False)
    assert {"Hello", "hello", "World", "world"} <= set(cased.vocabulary())
    assert ids(cased, "Hello") != ids(cased, "hello")
    assert ids(cased, "HELLO") == [UNK_ID]


def test_whitespace_split_and_out_of_vocabulary():
    v = Vectorizer.fit(["the cat sat", "the dog"])
    the, cat = v.tokenizer.token_to_id("the"), v.tokenizer.token_to_id("cat")
    assert ids(v, "the  zebra\tcat\nquux") == [the, UNK_ID, cat, UNK_ID]
    # a text with nothing left after standardisation becomes a single [UNK], never empty
    assert ids(v, "") == [UNK_ID]
    assert ids(v, "?!...") == [UNK_ID]
    assert all(e.dtype == np.int32 for e in v.encode(["the cat", ""]))


def test_most_frequent_words_get_the_lowest_ids():
    counts = {"alpha": 7, "beta": 5, "gamma": 3, "delta": 2, "eps": 1}
    texts = [w for w, c in counts.items() for _ in range(c)]
    v = Vectorizer.fit(np.random.default_rng(0).permutation(texts).tolist())
    assert v.vocabulary() == [PAD, UNK, "alpha", "beta", "gamma", "delta", "eps"]
    assert v.vocab_size == 7


def test_max_vocab_caps_size_keeping_the_most_frequent():
    counts = {"alpha": 7, "beta": 5, "gamma": 3, "delta": 2, "eps": 1}
    texts = [w for w, c in counts.items() for _ in range(c)]
    v = Vectorizer.fit(texts, max_vocab=5)  # two special tokens + the three most frequent words
    assert v.vocab_size == 5
    assert v.vocabulary() == [PAD, UNK, "alpha", "beta", "gamma"]
    assert ids(v, "delta alpha") == [UNK_ID, 2]
    assert Vectorizer.fit(texts, max_vocab=None).vocab_size == 7


def test_min_frequency():
    v = Vectorizer.fit(["a a b", "a c c"], min_frequency=2)
    assert v.vocabulary() == [PAD, UNK, "a", "c"]


def test_truncation_at_max_length():
    text = " ".join(f"w{i}" for i in range(300))
    v = Vectorizer.fit([text], max_length=16)
    out = ids(v, text)
    assert len(out) == 16
    assert out == ids(Vectorizer.fit([text], max_length=None), text)[:16]
    assert len(ids(Vectorizer.fit([text], max_length=None), text)) == 300


def test_save_load_round_trip(tmp_path):
    texts = ["What is the best way to learn Python?", "How do I learn python quickly?", "Ünïcode — text!"]
    v = Vectorizer.fit(texts, lowercase=False, max_length=5)
    path = tmp_path / "tokenizer.json"
    v.save(path)
    loaded = Vectorizer.load(path)
    probe = texts + ["never seen words here", "", "LEARN learn, learn. learn; learn learn learn"]
    for a, b in zip(v.encode(probe), loaded.encode(probe)):
        np.testing.assert_array_equal(a, b)
    assert loaded.vocabulary() == v.vocabulary()
    assert len(loaded.encode(["a b c d e f g h"])[0]) == 5  # truncation survives the round trip


def test_load_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="not a readable tokenizer.json"):
        Vectorizer.load(bad)
    with pytest.raises(ModelError, match="not a readable tokenizer.json"):
        Vectorizer.load(tmp_path / "missing.json")
    # a valid tokenizer without [PAD]/[UNK] at ids 0/1
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    other = tmp_path / "other.json"
    Tokenizer(WordLevel({"x": 0, "[UNK]": 1, "[PAD]": 2}, unk_token="[UNK]")).save(str(other))
    with pytest.raises(ModelError, match=r"expected \[PAD\] at id 0"):
        Vectorizer.load(other)


def test_pad_shapes_and_values():
    seqs = [np.array([5, 6, 7], dtype=np.int32), np.array([8], dtype=np.int32), np.array([9, 10], dtype=np.int32)]
    batch, lengths = pad(seqs)
    assert batch.shape == (3, 3) and batch.dtype == np.int64
    assert lengths.tolist() == [3, 1, 2] and lengths.dtype == np.int64
    np.testing.assert_array_equal(batch, [[5, 6, 7], [8, PAD_ID, PAD_ID], [9, 10, PAD_ID]])


def test_pad_edge_cases():
    batch, lengths = pad([])
    assert batch.shape == (0, 1) and lengths.shape == (0,)
    batch, lengths = pad([np.array([], dtype=np.int32), np.array([4], dtype=np.int32)])
    assert batch.tolist() == [[0], [4]] and lengths.tolist() == [0, 1]


# -- pretrained tokenizers: the padding id is the tokenizer's own ------------------------------


def test_pretrained_pad_id_is_the_tokenizers_own(tmp_path, wordpiece):
    v = PretrainedVectorizer.load(wordpiece(tmp_path))
    assert (v.pad_id, v.pad_token) == (1, "<pad>")
    ids = v.encode(["hello world", "how are you worlds"])
    assert [len(i) for i in ids] == [4, 7]  # <s> ... </s>, no fixed-length padding left
    batch, lengths = pad(ids, v.pad_id)
    assert batch[0].tolist() == [0, 4, 5, 2, 1, 1, 1] and lengths.tolist() == [4, 7]
    # Saved and loaded again (a model folder's tokenizer.json), the id survives, though the
    # vocabulary also holds an unused [PAD] (id 6).
    v.save(tmp_path / "saved.json")
    again = PretrainedVectorizer.load(tmp_path / "saved.json")
    assert again.pad_id == 1 and again.tokenizer.to_str() == v.tokenizer.to_str()
    assert [a.tolist() for a in again.encode(["hello world"])] == [[0, 4, 5, 2]]


def test_pretrained_pad_token_found_without_padding_settings(tmp_path, wordpiece):
    assert PretrainedVectorizer.load(wordpiece(tmp_path, padding=False)).pad_id == 1  # "<pad>"
    with pytest.raises(ModelError, match="no padding token"):
        PretrainedVectorizer.load(wordpiece(tmp_path, pad=None))


def test_word_vocabularies_pad_with_zero():
    assert Vectorizer.fit(["a b c"]).pad_id == PAD_ID == 0
    assert pad([np.array([5], dtype=np.int32), np.array([5, 6], dtype=np.int32)], 3)[0].tolist() == [[5, 3], [5, 6]]


# -- out-of-vocabulary buckets (Keras num_oov_indices) --------------------------------------------


def test_oov_buckets_zero_is_todays_vectorizer():
    texts = ["the cat sat", "the dog"]
    probe = ["the zebra cat", "", "quux?!", "dog dog"]
    plain, zero = Vectorizer.fit(texts), Vectorizer.fit(texts, oov_buckets=0)
    for a, b in zip(plain.encode(probe), zero.encode(probe)):
        np.testing.assert_array_equal(a, b)
    assert zero.vocab_size == plain.vocab_size == 6 and ids(zero, "the zebra") == [2, UNK_ID]


def test_unknown_words_hash_into_buckets_after_the_vocabulary():
    import zlib

    v = Vectorizer.fit(["the cat sat", "the dog"], oov_buckets=100)
    words = v.vocab_size - 100  # the first bucket's id
    assert v.vocab_size == 106 and len(v.vocabulary()) == 106 and v.vocabulary()[-1] == "[OOV 99]"
    the, cat = v.tokenizer.token_to_id("the"), v.tokenizer.token_to_id("cat")
    zebra = words + zlib.crc32(b"zebra") % 100
    # known words keep their ids; an unknown word gets the same bucket wherever it appears,
    # after the same standardisation as the vocabulary (case, punctuation)
    assert ids(v, "the zebra cat") == [the, zebra, cat]
    assert ids(v, "Zebra!") == ids(v, "ZEB-RA") == [zebra]
    assert ids(v, "ibis") != ids(v, "zebra") and all(words <= i < v.vocab_size for i in ids(v, "ibis okapi"))
    assert ids(v, "") == ids(v, "?!") == [UNK_ID]  # nothing left: still [UNK], never empty
    counts = v.counts(["zebra zebra the"])
    assert counts.shape == (106,) and counts[zebra] == 2 and counts[the] == 1


def test_oov_hashing_lines_up_with_truncation_and_odd_whitespace():
    v = Vectorizer.fit(["a b"], oov_buckets=1000, max_length=4)
    text = "a x1 b x2 x3 x4"
    out = ids(v, text)
    assert len(out) == 4 and out == ids(v, "a x1 b x2")  # the first four words, hashed as they come
    # \x1c..\x1f split words for Python's str.split() but not for the tokenizer: one word here
    assert len(ids(v, "a\x1cb x1")) == 2 and ids(v, "a\x1cb")[0] not in (v.tokenizer.token_to_id("a"), UNK_ID)


def test_oov_hashing_is_the_same_in_another_process(tmp_path):
    """CRC-32, not Python's per-process salted hash(): a saved model maps an unseen word (and its
    character n-grams) to the same buckets in every process."""
    import json
    import os
    import subprocess
    import sys

    v = Vectorizer.fit(["the cat sat"], oov_buckets=4096, char_ngrams=(3, 5), char_buckets=4096)
    v.save(tmp_path / "tokenizer.json")
    texts = ["a zebra and an okapi", "Ünïcode wörds ça"]
    code = (
        "import json, sys; from siamese.data.vocabulary import Vectorizer; "
        "v = Vectorizer.load(sys.argv[1], oov_buckets=4096, char_ngrams=(3, 5), char_buckets=4096); "
        f"print(json.dumps([a.tolist() for a in v.encode({texts!r})]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "tokenizer.json")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(out.stdout) == [a.tolist() for a in v.encode(texts)]


# -- character n-grams (fastText subwords) -------------------------------------------------------


def test_char_ngrams_follow_the_words_as_hashed_ids():
    import zlib

    plain = Vectorizer.fit(["the cat sat"], oov_buckets=16)
    v = Vectorizer.fit(["the cat sat"], oov_buckets=16, char_ngrams=(3, 4), char_buckets=1000)
    assert v.char_start == plain.vocab_size and v.vocab_size == plain.vocab_size + 1000
    assert len(v.vocabulary()) == v.vocab_size and v.vocabulary()[-1] == "[CHAR 999]"
    out = ids(v, "The cat!")
    assert out[:2] == ids(plain, "The cat!")  # the words first, as without n-grams
    grams = ["<th", "the", "he>", "<the", "the>", "<ca", "cat", "at>", "<cat", "cat>"]  # of "<the>", then "<cat>"
    assert out[2:] == [v.char_start + zlib.crc32(g.encode()) % 1000 for g in grams]
    # an unseen word (hashed into an OOV bucket) still gets its n-grams; word forms share most
    form, other = set(ids(v, "hypertension")[1:]), set(ids(v, "hypertensive")[1:])
    assert ids(v, "hypertension")[0] < v.char_start and len(form & other) / len(form | other) > 0.5
    assert ids(v, "") == ids(v, "?!") == [UNK_ID]
    counts = v.counts(["cat cat"])
    assert counts.shape == (v.vocab_size,) and counts[v.char_start :].sum() == 10


def test_char_ngrams_only_of_the_words_kept_by_truncation():
    v = Vectorizer.fit(["a b"], char_ngrams=(3, 3), char_buckets=10_000, max_length=2)
    out = ids(v, "a b cdefgh")
    assert out[:2] == ids(v, "a b")[:2] and len(out) == 2 + 2 * 1  # "<a>" and "<b>": one 3-gram each


@pytest.mark.parametrize(
    "bad, buckets", [((3,), 10), ((5, 3), 10), ((0, 2), 10), ((3, 4.5), 10), ("3-5", 10), ((3, 5), 0)]
)
def test_char_ngrams_refuse_bad_values(bad, buckets):
    from siamese import ConfigError

    with pytest.raises(ConfigError, match="char_ngrams must be two lengths|char_buckets must be"):
        Vectorizer.fit(["a b"], char_ngrams=bad, char_buckets=buckets)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_oov_buckets_refuses_bad_values(bad):
    from siamese import ConfigError

    with pytest.raises(ConfigError, match="oov_buckets must be a whole number >= 0"):
        Vectorizer.fit(["a b"], oov_buckets=bad)


# -- BERT-normalised tokenizers: ASCII texts skip the Rust normalizer (siamese normalises them) ---


def _minilm_vectorizer(static: bool = False) -> PretrainedVectorizer:
    """MiniLM's tokenizer as a transformer uses it ([CLS] … [SEP]: the twin tokenizer's path) or
    as a static student does (no post-processor: the word cache's path)."""
    from siamese.models.pretrained import model_folder

    vectorizer = PretrainedVectorizer.load(model_folder("minilm") / "tokenizer.json")
    if static:
        spec = json.loads(vectorizer.tokenizer.to_str())
        spec["post_processor"] = None
        vectorizer = PretrainedVectorizer(Tokenizer.from_str(json.dumps(spec)), vectorizer.pad_id, vectorizer.pad_token)
    twin = vectorizer._ascii_twin()
    assert twin is not None and (twin[2] is not None) == static  # the path under test is the one taken
    return vectorizer


def _reference_ids(vectorizer: Vectorizer, texts: list[str]) -> list[list[int]]:
    encodings = vectorizer.tokenizer.encode_batch_fast(texts, add_special_tokens=vectorizer.add_special_tokens)
    return [e.ids for e in encodings]


@pytest.mark.parametrize("static", [False, True], ids=["twin", "word-cache"])
def test_ascii_fast_path_gives_the_tokenizers_own_ids_on_real_texts(data_dir, static):
    from siamese import datasets

    vectorizer = _minilm_vectorizer(static)
    texts = []
    for name in ["quora-sample", "msrp-test", "mqp", "sts-test", "twitter-url-test"]:
        pairs = datasets.load(name, data_dir)
        texts += pairs.text1 + pairs.text2
    texts += [
        "Crème brûlée?",
        "東京 tower",
        "naïve\u00a0café",
        "tab\there",
        "ctrl\x0bchar\x7f",
        "\x00",
        "",
        "x" * 150 + " fine",
        "unaffable",
        "A-B_C.d",
    ]  # a word past WordPiece's 100 characters: [UNK]
    assert 0 < sum(not t.isascii() for t in texts) < len(texts)  # both paths, interleaved
    want = [ids or [UNK_ID] for ids in _reference_ids(vectorizer, texts)]
    for _ in range(2):  # the word cache empty, then full
        assert [list(ids) for ids in vectorizer.encode(texts)] == want
    flat, lengths = vectorizer.encode_flat(texts)
    assert flat.tolist() == [i for ids in want for i in ids] and lengths.tolist() == [len(ids) for ids in want]


# Any ASCII, with the special tokens typed in now and then (they are text on both paths).
_ASCII_TEXT = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(max_codepoint=127), max_size=12),
        st.sampled_from(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
    ),
    max_size=5,
).map("".join)

_VECTORIZERS = {
    static: lru_cache(maxsize=1)(lambda static=static: _minilm_vectorizer(static)) for static in (False, True)
}  # one per session: hypothesis calls the test 300 times


@pytest.mark.parametrize("static", [False, True], ids=["twin", "word-cache"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_ASCII_TEXT, min_size=1, max_size=20))
def test_ascii_fast_path_matches_the_normalizer_on_any_ascii(static, texts):
    vectorizer = _VECTORIZERS[static]()
    got = [list(ids) for ids in vectorizer.encode(texts)]
    assert got == [ids or [UNK_ID] for ids in _reference_ids(vectorizer, texts)]


@pytest.mark.parametrize("static", [False, True], ids=["twin", "word-cache"])
def test_the_fast_path_follows_the_tokenizers_truncation(static):
    vectorizer = _minilm_vectorizer(static)
    text = "word " * 300 + "end"
    assert len(vectorizer.encode([text])[0]) == 128  # PretrainedVectorizer.load's default, [CLS] and [SEP] within
    vectorizer.tokenizer.enable_truncation(16)
    assert len(vectorizer.encode([text])[0]) == 16
    vectorizer.tokenizer.enable_truncation(16, direction="left")
    assert [list(ids) for ids in vectorizer.encode([text, "short one"])] == _reference_ids(
        vectorizer, [text, "short one"]
    )


@pytest.mark.parametrize("static", [False, True], ids=["twin", "word-cache"])
def test_a_special_token_typed_into_a_text_is_text_on_every_path(static):
    """ "[PAD]" or "[SEP]" in a user's text is its characters, whether the text is ASCII (the fast
    path) or not (the tokenizer's own): it neither ends the text nor turns into padding."""
    vectorizer = _minilm_vectorizer(static)
    ascii_ids, other_ids = (list(ids) for ids in vectorizer.encode(["[PAD] a [SEP] b", "[PAD] é [SEP] b"]))
    bracket, sep = vectorizer.tokenizer.token_to_id("["), vectorizer.tokenizer.token_to_id("[SEP]")
    for ids in (ascii_ids, other_ids):
        assert ids.count(bracket) == 2 and PAD_ID not in ids
        assert ids.count(sep) == (0 if static else 1)  # only the one the tokenizer adds at the end
    assert ascii_ids[:3] == other_ids[:3]  # both read "[PAD]" alike
