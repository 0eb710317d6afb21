"""Cross-encoders: train (API and CLI), score symmetrically, save/load, and work with every
pair-scoring command while the vector commands refuse them; on real pairs and MiniLM's weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import invoke

from siamese import ModelError, SiameseModel, datasets
from siamese.config.configs import TrainConfig
from siamese.cross import CrossConfig, CrossEncoder, train_cross
from siamese.evaluation.metrics import evaluate
from siamese.models.loading import load_model


@pytest.fixture(scope="module")
def small(data_dir):
    pairs = datasets.load("paws-qqp-train", data_dir)
    rows = np.random.default_rng(0).permutation(len(pairs))
    return pairs.subset(rows[:96]), pairs.subset(rows[96:160])


@pytest.fixture(scope="module")
def cross_model(small, tmp_path_factory):
    train_pairs, val = small
    model = train_cross(
        train_pairs,
        val,
        model_config=CrossConfig(max_length=64),
        config=TrainConfig(epochs=1, batch_size=16, lr=5e-5, precision="fp32"),
        progress=False,
    )
    path = model.save(tmp_path_factory.mktemp("cross") / "model")
    return model, path


def test_scores_are_symmetric_probabilities_and_survive_save_and_load(cross_model, small):
    model, path = cross_model
    _, val = small
    s = model.similarity_pairwise(val.text1, val.text2)
    assert s.shape == (len(val),) and ((s >= 0) & (s <= 1)).all()
    np.testing.assert_allclose(model.similarity_pairwise(val.text2, val.text1), s, atol=1e-6)  # both orders averaged
    one_way = model.logits(val.text1, val.text2)
    assert not np.allclose(one_way, model.logits(val.text2, val.text1), atol=1e-4)  # the network itself is not
    loaded = load_model(path)
    assert isinstance(loaded, CrossEncoder) and loaded.threshold == model.threshold
    np.testing.assert_allclose(loaded.similarity_pairwise(val.text1, val.text2), s, atol=1e-5)
    assert loaded.fingerprint() == model.fingerprint()
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    info = model.info["training"]
    assert info["train_pairs"] == 96 and info["history"][0]["pairs"] == 192  # both orders
    assert info["calibration"]["fitted"] and 0 < model.threshold < 1


def test_predict_takes_what_a_bi_encoder_s_predict_takes(cross_model, small):
    """It took only two lists; sentence-transformers' CrossEncoder.predict takes a list of pairs."""
    import pandas as pd

    model, _ = cross_model
    _, val = small
    a, b = val.text1[:6], val.text2[:6]
    expected = (model.similarity_pairwise(a, b) > model.threshold).tolist()
    assert model.predict(a, b).tolist() == expected
    assert model.predict(list(zip(a, b))).tolist() == expected
    assert model.predict(pd.DataFrame({"question1": a, "question2": b})).tolist() == expected
    assert model.predict((a[0], b[0])) is expected[0]
    assert model.predict(list(zip(a, b)), threshold=0.0).all()
    with pytest.raises(ValueError, match="predict takes a pair"):
        model.predict(5)


def test_a_special_token_typed_into_a_text_keeps_the_pair_apart(cross_model):
    """A "[SEP]" in a user's text is its characters: each pair still has exactly one text a and one
    text b, "[CLS] a [SEP] b [SEP]", with b's token types 1."""
    model, _ = cross_model
    tok = model.tokenizer.tokenizer
    sep = tok.token_to_id("[SEP]")
    (enc,) = model.tokenizer.encode(["why [SEP] me"], ["[PAD] who"])
    assert enc.ids.count(sep) == 2 and tok.token_to_id("[PAD]") not in enc.ids
    assert enc.type_ids[enc.ids.index(sep) + 1] == 1  # "[" of "[PAD]" starts text b


def test_a_saved_cross_encoder_loads_without_transformers(cross_model):
    """Its MiniLM is rebuilt by siamese.models.encoders.bert: a command that scores pairs starts fast."""
    import subprocess
    import sys

    model, path = cross_model
    code = (
        "import sys; from siamese.models.loading import load_model; "
        f"m = load_model({str(path)!r}, device='cpu'); "
        "print(float(m.similarity_pairwise(['how do i cook rice'], ['how is rice cooked'])[0]), "
        "'transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    score, imported = done.stdout.split()
    assert imported == "False"
    assert float(score) == pytest.approx(
        float(model.similarity_pairwise(["how do i cook rice"], ["how is rice cooked"])[0]), abs=1e-5
    )


def test_training_moves_the_weights_and_evaluates_like_any_model(cross_model, small):
    model, _ = cross_model
    start = CrossEncoder.build(CrossConfig(max_length=64))
    before = dict(start.network.transformer.named_parameters())
    changed = [n for n, p in model.network.transformer.named_parameters() if not torch.equal(p, before[n])]
    assert len(changed) > 10
    metrics = evaluate(model, small[1])
    assert {"accuracy", "roc_auc", "ece", "brier"} <= set(metrics) and metrics["n"] == 64


def test_vector_commands_refuse_a_cross_encoder(cross_model):
    _, path = cross_model
    with pytest.raises(ModelError, match="a cross-encoder scores pairs and has no vectors"):
        SiameseModel.load(path)


def test_resume_after_a_crash_ends_as_the_uninterrupted_run(small, tmp_path, monkeypatch):
    from siamese.training.loop import Checkpoint

    train_pairs, val = small
    kw = dict(
        model_config=CrossConfig(max_length=32),
        config=TrainConfig(epochs=2, batch_size=32, precision="fp32", calibrate=False),
        progress=False,
    )
    sub, subval = train_pairs.subset(np.arange(32)), val.subset(np.arange(16))
    whole = train_cross(sub, subval, **kw)
    written = Checkpoint.__call__

    def crash_after_epoch_1(self, trainer):
        written(self, trainer)
        raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoint, "__call__", crash_after_epoch_1)
    with pytest.raises(KeyboardInterrupt):
        train_cross(sub, subval, checkpoint=tmp_path / "ck", **kw)
    monkeypatch.undo()
    assert isinstance(load_model(tmp_path / "ck"), CrossEncoder)  # a checkpoint is a whole model folder
    resumed = train_cross(sub, subval, checkpoint=tmp_path / "ck", resume=True, **kw)
    assert [h["loss"] for h in resumed.info["training"]["history"]] == [
        h["loss"] for h in whole.info["training"]["history"]
    ]
    np.testing.assert_array_equal(
        resumed.similarity_pairwise(subval.text1, subval.text2), whole.similarity_pairwise(subval.text1, subval.text2)
    )


def run(*args):
    return invoke(*args)  # the command in this process (conftest.invoke)


def test_cli_trains_a_cross_encoder_and_the_pair_commands_use_it(cross_model, data_dir, tmp_path):
    _, path = cross_model
    proc = run("predict", path, "How do I learn Python?", "What is the best way to learn Python?", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert 0 <= out["similarity"] <= 1 and out["probability"] is not None
    proc = run(
        "predict", path, "--text1", "How do I learn Python?", "--text2", "How do I learn Java?", "--explain", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    explanation = json.loads(proc.stdout)["explanation"]
    assert explanation["method"] == "occlusion" and [w["word"] for w in explanation["text2"]][-1] == "Java?"
    paws = tmp_path / "paws.tsv"  # the first 200 PAWS-QQP dev/test pairs, in the file's own format
    paws.write_text(
        "".join((data_dir / "paws/paws_qqp_dev_and_test.tsv").read_text(encoding="utf-8").splitlines(True)[:201]),
        encoding="utf-8",
    )
    proc = run("evaluate", path, "--data", paws, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n"] == 200
    for args in (
        (
            "encode",
            path,
            "--data",
            data_dir / "quora/quora_question_pairs_sample300.csv",
            "--column",
            "question1",
            "--out",
            tmp_path / "v.npy",
        ),
        (
            "index",
            "build",
            path,
            "--data",
            data_dir / "quora/quora_question_pairs_sample300.csv",
            "--column",
            "question1",
            "--out",
            tmp_path / "idx",
        ),
    ):
        proc = run(*args)
        assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
        assert "cross-encoder scores pairs and has no vectors" in proc.stderr
    small_file = tmp_path / "pairs.csv"
    small_file.write_text(
        "question1,question2,is_duplicate\n"
        + "".join(
            f'"how do i cook rice {i}","what is the way to cook rice {i}",1\n'
            f'"how do i cook rice {i}","where is paris {i}",0\n'
            for i in range(12)
        )
    )
    proc = run(
        "train",
        "--cross",
        "--data",
        small_file,
        "--out",
        tmp_path / "cli",
        "--epochs",
        1,
        "--batch-size",
        8,
        "--quiet",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["kind"] == "cross" and isinstance(load_model(tmp_path / "cli"), CrossEncoder)
    proc = run("train", "--cross", "--loss", "mnr", "--data", small_file, "--out", tmp_path / "x")
    assert proc.returncode == 2 and "--cross trains a cross-encoder" in proc.stderr and not (tmp_path / "x").exists()


def test_search_rerank_lets_the_cross_encoder_decide(cross_model, trained, data_dir, tmp_path):
    from siamese import read_texts
    from siamese.search import DuplicateIndex
    from siamese.search.cascade import rerank

    model, path = cross_model
    corpus = read_texts(data_dir / "quora/quora_question_pairs_sample300.csv", "question1")[:150]
    index = DuplicateIndex(trained.model)
    index.add(corpus)
    queries = corpus[:3]
    hits = index.search(queries, k=8)
    ranked = rerank(model, queries, hits)
    for q, before, after in zip(queries, hits, ranked):
        assert {h.id for h in after} == {h.id for h in before}
        assert [h.similarity for h in after] == sorted((h.similarity for h in after), reverse=True)
        expected = model.similarity_pairwise([q] * len(before), [h.text for h in before])
        got = {h.id: h for h in after}
        for h, s in zip(before, expected):
            assert got[h.id].first_stage == pytest.approx(h.similarity)
            assert got[h.id].similarity == pytest.approx(float(s), abs=1e-5)
            assert got[h.id].duplicate == (s > model.threshold)
    # the same from the index itself, with the cross-encoder loaded or named by its folder
    for got_rows in (index.search(queries, k=8, rerank=model), index.search(queries[0], k=8, rerank=path)):
        for got_row, want in zip(got_rows, ranked):
            scores = {h.id: h.similarity for h in want}
            assert {h.id: h.similarity for h in got_row} == pytest.approx(scores, abs=1e-5)
    index.save(tmp_path / "idx")
    proc = run("search", tmp_path / "idx", queries[0], "-k", 4, "--rerank", path, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hits"]
    assert len(out) == 4 and all("first_stage" in h for h in out)
    proc = run("search", tmp_path / "idx", queries[0], "--rerank", trained.path)
    assert proc.returncode == 2 and "takes a cross-encoder" in proc.stderr


def test_dedupe_verify_lets_the_cross_encoder_decide_the_band(cross_model, trained, data_dir, tmp_path):
    from siamese import read_texts
    from siamese.search import dedupe

    model, path = cross_model
    texts = read_texts(data_dir / "quora/quora_question_pairs_sample300.csv", "question1")[:120]
    plain = dedupe(trained.model, texts, tmp_path / "plain", threshold=0.8, floor=0.5)
    checked = dedupe(
        trained.model, texts, tmp_path / "checked", threshold=0.8, floor=0.5, verify=model, verify_band=0.15
    )
    info = checked.meta["verified"]
    candidates = list(plain.pairs)
    band = [abs(s - 0.8) <= 0.15 for _, _, s in candidates]
    inside = [(a, b) for (a, b, _), x in zip(candidates, band) if x]
    assert info["candidates"] == len(candidates) and info["verified"] == len(inside) > 0
    verdict = model.similarity_pairwise([texts[a] for a, _ in inside], [texts[b] for _, b in inside]) > model.threshold
    assert info["accepted"] == int(verdict.sum())
    expected = {(a, b) for (a, b, _), x in zip(candidates, band) if not x} | {p for p, v in zip(inside, verdict) if v}
    assert {(a, b) for a, b, _ in checked.pairs} == expected
    # at the threshold, the duplicates are the sure ones above the band plus those the cross-encoder accepted
    above = {(a, b) for a, b, s in checked.pairs if s > 0.8}
    assert above == {(a, b) for (a, b, s), x in zip(candidates, band) if not x and s > 0.8} | {
        p for p, v in zip(inside, verdict) if v
    }
    proc = run(
        "dedupe",
        trained.path,
        "--data",
        data_dir / "quora/quora_question_pairs_sample300.csv",
        "--column",
        "question1",
        "--out",
        tmp_path / "cli",
        "--threshold",
        0.8,
        "--verify",
        path,
        "--verify-all",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verified"]["band"] is None


def test_served_cross_encoder_answers_similarity_and_refuses_vectors(cross_model):
    import urllib.error
    import urllib.request

    from conftest import serving

    model, path = cross_model
    pairs = [
        ["How do I learn Python?", "What is the best way to learn Python?"],
        ["How do I learn Python?", "Where is Paris?"],
    ]

    def post(base, route, body):
        request = urllib.request.Request(base + route, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    with serving(path) as base:
        status, out = post(base, "/similarity", {"pairs": pairs, "explain": True})
        assert status == 200
        expected = model.similarity_pairwise([a for a, _ in pairs], [b for _, b in pairs])
        assert [r["similarity"] for r in out["results"]] == pytest.approx(expected.tolist(), abs=1e-5)
        assert out["results"][0]["explanation"]["method"] == "occlusion"
        status, out = post(base, "/embed", {"texts": ["a question"]})
        assert status == 400 and "cross-encoder" in out["detail"]
