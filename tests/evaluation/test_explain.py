"""Explanations (siamese.evaluation.explain): exact per-word shares for the bag of words (and the static
student: tests/distill/test_static_student.py), occlusion for the LSTM and MiniLM; the CLI's --explain
and the HTTP explain field."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
from conftest import EXPLAIN_PAIRS as PAIRS
from conftest import assert_exact_shares as assert_exact
from conftest import invoke

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.errors import DataError

os.environ["HF_HUB_OFFLINE"] = "1"

BOW_VARIANTS = {
    "words": ModelConfig(encoder="bow", dim=48),
    "pairs in the mean": ModelConfig(encoder="bow", dim=48, encoder_options={"ngrams": 2, "buckets": 4096}),
    "pairs apart, window 3": ModelConfig(
        encoder="bow", dim=48, encoder_options={"ngrams": 2, "buckets": 4096, "window": 3, "pair_mix": 0.6}
    ),
    "oov buckets + char n-grams + pairs": ModelConfig(
        encoder="bow",
        dim=48,
        oov_buckets=512,
        char_ngrams=[3, 5],
        char_buckets=4096,
        encoder_options={"ngrams": 2, "buckets": 4096, "pair_mix": 0.8},
    ),
}


@pytest.mark.parametrize("variant", list(BOW_VARIANTS))
def test_bag_of_words_shares_sum_to_the_similarity(variant, data_dir):
    pairs = datasets.load("msrp-train", data_dir).positives().subset(range(400))
    val = datasets.load("msrp-val", data_dir).subset(range(200))
    model = train(
        pairs,
        val,
        model_config=BOW_VARIANTS[variant],
        config=TrainConfig(epochs=1, batch_size=64, seed=0),
        progress=False,
    )
    assert_exact(model, PAIRS + list(zip(val.text1[:5], val.text2[:5])))


def test_a_shared_rare_word_outweighs_function_words(data_dir):
    texts = datasets.load("msrp-train", data_dir)
    model = SiameseModel.build(texts.text1 + texts.text2, ModelConfig(encoder="bow", dim=64))
    e = model.explain("the stock of Microsoft fell", "the shares of Microsoft dropped")
    ranked = sorted(e.text1, key=lambda w: -w.weight)
    assert ranked[0].word == "Microsoft", ranked  # SIF: "the" and "of" are shared too, but weigh little


@pytest.fixture(scope="module")
def minilm():
    return SiameseModel.build([], ModelConfig(encoder="transformer", max_length=64))


@pytest.mark.slow  # loads MiniLM
def test_occlusion_finds_the_word_that_matters_with_minilm(minilm):
    e = minilm.explain("my neighbour's cat sleeps on the warm sofa all day", "a kitten")
    assert e.method == "occlusion"
    assert e.similarity == pytest.approx(
        float(minilm.similarity_pairwise(["my neighbour's cat sleeps on the warm sofa all day"], ["a kitten"])[0]),
        abs=1e-5,
    )
    assert max(e.text1, key=lambda w: w.weight).word == "cat", e.text1
    assert max(e.text2, key=lambda w: w.weight).word == "kitten", e.text2
    # the weight is the drop when the word is gone
    without = float(minilm.similarity_pairwise(["my neighbour's sleeps on the warm sofa all day"], ["a kitten"])[0])
    cat = next(w for w in e.text1 if w.word == "cat")
    assert cat.weight == pytest.approx(e.similarity - without, abs=1e-5)


@pytest.mark.slow  # loads MiniLM
def test_explanation_states_the_similarity_reported_beside_it(minilm):
    # this pair sits within 1e-3 of MiniLM's threshold: two numbers for it would read as two verdicts
    a, b = "When will I see you?", "When can I see you again?"
    reported = float(minilm.similarity_pairwise([a], [b])[0])
    e = minilm.explain(a, b, similarity=reported)
    assert e.similarity == reported
    without = float(minilm.similarity_pairwise(["will I see you?"], [b])[0])
    assert e.text1[0].weight == pytest.approx(reported - without, abs=2e-3)  # weighed against the same number


def test_occlusion_with_the_lstm(trained):
    model = trained.model
    e = model.explain("How do I learn Python?", "How can I learn Python fast?")
    assert e.method == "occlusion" and [w.word for w in e.text2] == ["How", "can", "I", "learn", "Python", "fast?"]
    full = float(model.similarity_pairwise(["How do I learn Python?"], ["How can I learn Python fast?"])[0])
    assert e.similarity == pytest.approx(full, abs=1e-5)
    without = float(model.similarity_pairwise(["How do I learn Python?"], ["How can I learn fast?"])[0])
    assert e.text2[4].weight == pytest.approx(full - without, abs=1e-5)
    one = model.explain("Python", "python")  # a one-word text is scored empty without its word
    assert [w.word for w in one.text1] == ["Python"] and one.similarity == pytest.approx(1.0, abs=1e-5)


def test_empty_text_is_refused(trained):
    with pytest.raises(DataError, match="text2 is empty"):
        trained.model.explain("a question", "   ")


def test_cli_predict_explain_json(small_calibrated):
    proc = invoke(
        "predict",
        str(small_calibrated.path),
        "--text1",
        "How do I learn Python?",
        "--text2",
        "What is the best way to learn Python?",
        "--explain",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    model = small_calibrated.model
    assert out["similarity"] == pytest.approx(
        float(model.similarity_pairwise(["How do I learn Python?"], ["What is the best way to learn Python?"])[0]),
        abs=1e-5,
    )
    ex = out["explanation"]
    assert ex["similarity"] == out["similarity"]  # one similarity per pair
    assert ex["method"] == "occlusion"
    assert [w["word"] for w in ex["text1"]] == ["How", "do", "I", "learn", "Python?"]
    assert set(ex["text2"][0]) == {"word", "start", "end", "weight"}
    text = invoke(
        "predict",
        str(small_calibrated.path),
        "How do I learn Python?",
        "What is the best way to learn Python?",
        "--explain",
    )
    assert text.returncode == 0 and "text1 words by weight (occlusion): " in text.stdout
    both = invoke("predict", str(small_calibrated.path), "a", "b", "--text1", "c")
    assert both.returncode == 2 and both.stderr.strip() == "error: give text1 once: as an argument or as --text1"


def post(base: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        base + "/similarity", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_http_explain_field(server):
    base, model, _ = server
    pairs = [["When will I see you?", "When can I see you again?"], ["Is it raining in Paris?", "How tall is Everest?"]]
    status, body = post(base, {"pairs": pairs, "explain": True})
    assert status == 200
    for result, (a, b) in zip(body["results"], pairs):
        expected = model.explain(a, b).to_dict()
        assert result["explanation"]["similarity"] == result["similarity"]  # one similarity per pair
        assert result["explanation"]["method"] == "occlusion"
        assert [w["word"] for w in result["explanation"]["text1"]] == a.split()
        assert [w["weight"] for w in result["explanation"]["text2"]] == pytest.approx(
            [w["weight"] for w in expected["text2"]], abs=1e-5
        )
    status, body = post(base, {"pairs": pairs})
    assert status == 200 and "explanation" not in body["results"][0]
    status, body = post(base, {"pairs": [["a b", "c d"]] * 9, "explain": True})
    assert status == 422 and "at most 8 pairs" in body["detail"]
