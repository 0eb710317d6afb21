"""Verdicts in a cascade (siamese.decision.cascade) for predict, score and the service: a fast first
stage (an untrained GloVe bag of words) scores real Medical Question Pairs, and all-MiniLM-L6-v2
decides those in the band. Outside the band the first stage's verdict stands; inside it, MiniLM's
score is its own cosine of the two texts and decides; --verify-all is MiniLM's own verdicts; the
band chosen on a sample agrees with MiniLM on its duplicates. Through the Python API, the command
line and a real server on 127.0.0.1."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import assert_user_error, call, invoke, run_json, serving

from siamese import ModelConfig, SiameseModel, datasets, verify_pairs
from siamese.decision.cascade import band_from_labels
from siamese.evaluation.scoring import verdict_metrics
from siamese.models.loading import load_verifier
from siamese.models.sentence_encoder import from_pretrained

PAIRS = 100
BAND = 0.05


@pytest.fixture(scope="module")
def mqp(data_dir):
    pairs = datasets.load("mqp", data_dir)
    return pairs.subset(np.random.default_rng(0).permutation(len(pairs))[:PAIRS])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("cascade")


@pytest.fixture(scope="module")
def first(data_dir, mqp, folder):
    """The first stage: mean GloVe vectors with word weights (no training), its threshold at the
    median similarity of these pairs, so that there are verdicts of both kinds near it."""
    glove = str(data_dir / "glove" / "glove-50d-5k.json")
    model = SiameseModel.build(mqp.text1 + mqp.text2, ModelConfig(encoder="bow", glove=glove, seed=0))
    model.set_threshold(float(np.median(model.similarity_pairwise(mqp.text1, mqp.text2))))
    return model, model.save(folder / "first")


@pytest.fixture(scope="module")
def verifier(folder):
    """MiniLM saved as a Siamese folder (its texts cut at 48 tokens: quicker, still MiniLM) and loaded back."""
    path = from_pretrained("minilm", max_length=48).save(folder / "minilm")
    return load_verifier(path, device="cpu"), path


@pytest.fixture(scope="module")
def own(verifier, mqp) -> np.ndarray:
    """MiniLM's own scores of the pairs, read directly."""
    return verifier[0].similarity_pairwise(mqp.text1, mqp.text2)


def test_outside_the_band_the_first_stage_decides_inside_it_the_verifier(first, verifier, own, mqp):
    model, _ = first
    done = verify_pairs(model, verifier[0], mqp.text1, mqp.text2, band=BAND)
    t, vt = model.threshold, verifier[0].threshold
    sims = model.similarity_pairwise(mqp.text1, mqp.text2)
    np.testing.assert_allclose(done.similarity, sims, atol=1e-6)
    assert (done.band.lo, done.band.hi) == pytest.approx((t - BAND, t + BAND))
    inside = np.abs(sims - t) <= BAND
    assert 5 < inside.sum() < PAIRS - 5
    np.testing.assert_array_equal(done.verified, inside)
    # outside: the first stage's verdict, and no verifier score
    np.testing.assert_array_equal(done.duplicate[~inside], sims[~inside] > t)
    assert np.isnan(done.verifier_score[~inside]).all()
    # inside: MiniLM's own cosine of the two texts, at MiniLM's threshold
    np.testing.assert_allclose(done.verifier_score[inside], own[inside], atol=1e-4)
    np.testing.assert_array_equal(done.duplicate[inside], done.verifier_score[inside] > vt)
    assert done.info["verified"] == inside.sum() and done.info["verifier"] == "bi-encoder"
    assert done.info["changed"] == int((done.duplicate != (sims > t)).sum()) > 0
    in_band = {mqp.text1[i] for i in np.flatnonzero(inside)} | {mqp.text2[i] for i in np.flatnonzero(inside)}
    assert done.info["texts_encoded"] == len(in_band)  # MiniLM reads only the band's texts, each once


def test_score_with_a_band_chosen_on_a_sample_agrees_with_the_verifier(first, verifier, own, mqp, data_dir, tmp_path):
    """score --verify (default for a bi-encoder: auto) on a labelled file: the sample is every pair
    here (fewer than 48 per bin), so the estimated agreement is exact and checked pair by pair."""
    model, path = first
    data = tmp_path / "pairs.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(
            [["question_1", "question_2", "label"], *zip(mqp.text1, mqp.text2, mqp.labels.tolist())]
        )
    out = tmp_path / "scored.csv"
    summary = run_json("score", path, "--data", data, "--out", out, "--verify", verifier[1], "-q")
    info, vt = summary["verify"], verifier[0].threshold
    band = info["band"]
    assert band["sampled"] == PAIRS and band["agreement"] >= 0.99
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    sims = np.array([float(r["similarity"]) for r in rows])
    duplicate = np.array([r["duplicate"] == "1" for r in rows])
    verified = np.array([r["verified"] == "1" for r in rows])
    mine = own > vt
    missed = int((mine & ~duplicate).sum() + (~mine & duplicate).sum())
    assert missed <= (1 - band["agreement"]) * mine.sum() + 1e-9  # the agreement the band promised
    inside = (sims >= band["lo"]) & (sims <= (np.inf if band["hi"] is None else band["hi"]))
    np.testing.assert_array_equal(verified, inside)
    assert info["verified"] == verified.sum() < PAIRS  # a band, not every pair
    above = sims > (np.inf if band["hi"] is None else band["hi"])
    np.testing.assert_array_equal(duplicate[~inside], above[~inside])
    scores = np.array([float(r["verifier_score"]) for r in rows if r["verified"] == "1"])
    np.testing.assert_allclose(scores, own[verified], atol=1e-4)
    assert all(r["verifier_score"] == "" for r in rows if r["verified"] == "0")
    # the metrics of the cascade's verdicts beside the first stage's alone, against the labels
    labels = mqp.labels == 1
    assert summary["metrics"]["cascade"] == pytest.approx(verdict_metrics(duplicate, labels))
    assert summary["metrics"]["first_stage"] == pytest.approx(verdict_metrics(sims > model.threshold, labels))
    assert summary["duplicates"] == {
        "cascade": int(duplicate.sum()),
        "first_stage": int((sims > model.threshold).sum()),
    }
    assert info["seconds"] > 0 and summary["columns"][-2:] == ["verified", "verifier_score"]


def test_verify_all_gives_the_verifiers_own_verdicts(first, verifier, own, mqp, tmp_path):
    data = tmp_path / "pairs.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text1", "text2"], *zip(mqp.text1, mqp.text2)])
    out = tmp_path / "scored.csv"
    proc = invoke("score", first[1], "--data", data, "--out", out, "--verify", verifier[1], "--verify-all", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "verified 100 of 100 pairs" in proc.stdout and "metrics" not in proc.stdout  # no labels: no metrics
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    np.testing.assert_array_equal([r["duplicate"] == "1" for r in rows], own > verifier[0].threshold)
    np.testing.assert_allclose([float(r["verifier_score"]) for r in rows], own, atol=1e-4)


def test_predict_says_whether_the_pair_was_verified_and_the_verifiers_score(first, verifier, own, mqp):
    model, path = first
    sims = model.similarity_pairwise(mqp.text1, mqp.text2)
    near = int(np.argmin(np.abs(sims - model.threshold)))
    far = int(np.argmax(np.abs(sims - model.threshold)))
    asked = run_json("predict", path, mqp.text1[near], mqp.text2[near], "--verify", verifier[1])
    assert asked["verified"] is True and asked["verifier_score"] == pytest.approx(float(own[near]), abs=1e-4)
    assert asked["duplicate"] == (asked["verifier_score"] > verifier[0].threshold)
    assert asked["first_stage_duplicate"] == bool(sims[near] > model.threshold)
    assert asked["verify"]["band"]["hi"] == pytest.approx(model.threshold + 0.1)  # the fixed band by default
    left = run_json("predict", path, mqp.text1[far], mqp.text2[far], "--verify", verifier[1], "--verify-band", "0.02")
    assert left["verified"] is False and left["verifier_score"] is None
    assert left["duplicate"] == left["first_stage_duplicate"] == bool(sims[far] > model.threshold)
    plain = invoke("predict", path, mqp.text1[near], mqp.text2[near], "--verify", verifier[1], "--verify-all")
    assert plain.returncode == 0 and "verified by" in plain.stdout.splitlines()[1]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--verify", "no-such-model"], "no-such-model: no such folder; --verify takes a model folder or one of"),
        (["--verify", "VERIFIER", "--verify-band", "auto"], "--verify-band auto is chosen on a sample"),
        (["--verify", "VERIFIER", "--verify-band", "0.1", "--verify-all"], "not both"),
        (["--verify", "VERIFIER", "--verify-band", "wide"], "--verify-band 'wide': a width"),
        (["--verify", "VERIFIER", "--verify-band", "-1"], "a width must be a finite number of 0 or more"),
        (["--verify", "VERIFIER", "--verify-band", "5"], "a width is at most 1; --verify-all"),  # was: every pair
        (["--verify-all"], "--verify-all go with --verify MODEL"),
    ],
)
def test_bad_verify_options_are_one_line_errors(first, verifier, args, fragment):
    args = [str(verifier[1]) if a == "VERIFIER" else a for a in args]
    assert_user_error(invoke("predict", first[1], "a question", "another question", *args), fragment)


def test_score_with_a_bad_verifier_writes_nothing(first, mqp, tmp_path):
    data = tmp_path / "pairs.csv"
    data.write_text("text1,text2\nhow do I sleep,how can I sleep\n", encoding="utf-8")
    out = tmp_path / "scored.csv"
    proc = invoke("score", first[1], "--data", data, "--out", out, "--verify", tmp_path / "missing", "-q")
    assert_user_error(proc, "missing: no such folder")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model\n", encoding="utf-8")
    assert_user_error(invoke("score", first[1], "--data", data, "--out", out, "--verify", notes), "not a folder")
    assert not out.exists()


def test_a_cross_encoder_verifies_too(first, mqp, folder, tmp_path):
    """A cross-encoder (MiniLM read with each pair; its head as built: the test needs a real model
    that scores pairs, not a good one) decides with its own threshold on its own scale; score's
    default band for it is the fixed one, as dedupe's."""
    import torch

    from siamese.cross import CrossConfig, CrossEncoder

    torch.manual_seed(0)
    path = CrossEncoder.build(CrossConfig(max_length=48)).save(folder / "cross")
    cross = load_verifier(path, device="cpu")
    a, b = mqp.text1[:16], mqp.text2[:16]
    done = verify_pairs(first[0], cross, a, b, band=None)
    scores = cross.similarity_pairwise(a, b)
    assert done.verified.all() and done.info["verifier"] == "cross-encoder"
    np.testing.assert_allclose(done.verifier_score, scores, atol=1e-5)
    np.testing.assert_array_equal(done.duplicate, scores > cross.threshold)
    data = tmp_path / "pairs.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text1", "text2"], *zip(a, b)])
    summary = run_json("score", first[1], "--data", data, "--out", tmp_path / "out.csv", "--verify", path, "-q")
    assert summary["verify"]["band"]["hi"] == pytest.approx(first[0].threshold + 0.1)
    assert summary["verify"]["verifier"] == "cross-encoder"
    # the library decides the default, not the command: siamese.score_file from Python gives the same band
    import siamese

    same = siamese.score_file(first[0], data, tmp_path / "python.csv", verify=cross)
    assert same["verify"]["band"] == summary["verify"]["band"]
    assert (tmp_path / "python.csv").read_text() == (tmp_path / "out.csv").read_text()


def test_the_service_decides_with_the_verifier_in_the_band(first, verifier, own, mqp):
    model, path = first
    assert_user_error(invoke("serve", path, "--verify", verifier[1], "--verify-band", "auto"), "--verify-band auto")
    sims = model.similarity_pairwise(mqp.text1, mqp.text2)
    rows = np.argsort(np.abs(sims - model.threshold))[::9][:12]  # near the threshold and far from it
    pairs = [[mqp.text1[i], mqp.text2[i]] for i in rows]
    with serving(path, None, "--verify", str(verifier[1]), "--verify-band", str(BAND)) as base:
        status, health = call(base, "/health")
        assert status == 200 and health["verifier"]["model"] == str(verifier[1])
        assert health["verifier"]["kind"] == "bi-encoder" and health["verifier"]["band"] == BAND
        status, body = call(base, "/similarity", {"pairs": pairs})
        assert status == 200 and body["verify"]["band"]["lo"] == pytest.approx(model.threshold - BAND)
        results = body["results"]
        inside = np.abs(sims[rows] - model.threshold) <= BAND
        assert 0 < inside.sum() < len(rows)
        assert [r["verified"] for r in results] == inside.tolist()
        for r, i, asked in zip(results, rows, inside):
            assert r["similarity"] == pytest.approx(float(sims[i]), abs=1e-5)
            assert r["first_stage_duplicate"] == bool(sims[i] > model.threshold)
            if asked:
                assert r["verifier_score"] == pytest.approx(float(own[i]), abs=1e-4)
                assert r["duplicate"] == (r["verifier_score"] > verifier[0].threshold)
            else:
                assert r["verifier_score"] is None and r["duplicate"] == r["first_stage_duplicate"]
        # bad input is still a 4xx with a verifier
        assert call(base, "/similarity", {"pairs": []})[0] == 422
        assert call(base, "/similarity", {"pairs": [["a question", " "]]})[0] == 422


def _brute_force_band(sims, scores, labels, t, vt, step=0.01):
    """Every width from 0 up, the cascade's accuracy on the labels by hand; the narrowest of the best."""
    widths = np.arange(0, np.ceil(np.abs(sims - t).max() / step) + 1) * step
    accuracy = [float((np.where(np.abs(sims - t) <= w, scores > vt, sims > t) == (labels == 1)).mean()) for w in widths]
    return float(widths[int(np.argmax(accuracy))]), max(accuracy)


def test_a_band_chosen_on_labels_is_the_most_accurate_and_empty_where_the_verifier_does_not_help():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    sims = np.clip(0.6 + 0.15 * (labels - 0.5) + rng.normal(0, 0.12, 400), -1, 1)  # a noisy first stage
    good = np.where(labels == 1, 0.9, 0.2) + rng.normal(0, 0.05, 400)  # a verifier that knows
    for scores in (good, -good):  # the second verifier is always wrong
        band = band_from_labels(sims, scores, labels, threshold=0.6, verifier_threshold=0.55)
        width, accuracy = _brute_force_band(sims, scores, labels, 0.6, 0.55)
        assert (band.hi - 0.6, 0.6 - band.lo) == pytest.approx((width, width), abs=1e-9)
        assert band.agreement == pytest.approx(accuracy, abs=1e-4) and band.sampled == 400
    assert band.hi == band.lo == 0.6  # a verifier that is always wrong is never asked
    right = band_from_labels(sims, good, labels, threshold=0.6, verifier_threshold=0.55)
    assert right.hi - right.lo > 0.2 and right.agreement > float(((sims > 0.6) == labels).mean()) + 0.1


def test_score_predict_and_serve_take_a_band_chosen_on_a_labelled_file(first, verifier, data_dir, tmp_path):
    """--verify-band LABELS: the width most accurate on held-out labelled pairs (other MQP pairs than the
    scored ones), said on stderr; dedupe refuses it, and labels of one kind are a one-line error."""
    model, path = first
    every = datasets.load("mqp", data_dir)
    held = every.subset(np.random.default_rng(0).permutation(len(every))[PAIRS : PAIRS + 200])
    labels = tmp_path / "held-out.csv"
    with open(labels, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text1", "text2", "label"], *zip(held.text1, held.text2, held.labels.tolist())])
    sims = model.similarity_pairwise(held.text1, held.text2)
    width, accuracy = _brute_force_band(
        sims, verifier[0].similarity_pairwise(held.text1, held.text2), held.labels, model.threshold,
        verifier[0].threshold,
    )  # fmt: skip
    assert width > 0  # MiniLM judges MQP better than untrained GloVe vectors near their threshold
    data = tmp_path / "pairs.csv"
    data.write_text("text1,text2\nhow do I sleep well,how can I sleep better\n", encoding="utf-8")
    out = tmp_path / "scored.csv"
    verify = ("--verify", verifier[1], "--verify-band", labels)
    proc = invoke("score", path, "--data", data, "--out", out, *verify, "--json")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("--verify-band")]
    assert said and f"±{width:.2f}" in said[0] and f"on its 200 pairs (accuracy {accuracy:.3f})" in said[0]
    band = json.loads(proc.stdout)["verify"]["band"]
    assert (band["lo"], band["hi"]) == pytest.approx((model.threshold - width, model.threshold + width), abs=1e-5)
    asked = run_json("predict", path, "how do I sleep well", "how can I sleep better", *verify)
    assert asked["verify"]["band"]["hi"] == pytest.approx(model.threshold + width, abs=1e-5)
    assert_user_error(
        invoke("dedupe", path, "--data", data, "--out", tmp_path / "dd", *verify),
        "a band chosen on labelled pairs is for predict, score and serve",
    )
    one_kind = tmp_path / "duplicates-only.csv"
    one_kind.write_text("text1,text2,label\nhow do I sleep,how can I sleep,1\na,b,1\n", encoding="utf-8")
    assert_user_error(
        invoke("score", path, "--data", data, "--out", tmp_path / "not.csv", *verify[:3], one_kind, "-q"),
        "duplicates-only.csv: 2 pairs, all labelled 1; the band is chosen on pairs of both kinds",
    )
    assert not (tmp_path / "not.csv").exists() and not (tmp_path / "dd").exists()
    with serving(path, None, "--verify", str(verifier[1]), "--verify-band", str(labels)) as base:
        status, health = call(base, "/health")
        assert status == 200 and health["verifier"]["band"] == pytest.approx(width, abs=1e-6)


def test_pair_scorer_encodes_each_text_once_and_scores_in_chunks(verifier, mqp, monkeypatch):
    """PairScorer (the cascade's bi-encoder verifier) over calls that add texts out of order and pairs
    more than a chunk at a time: each pair's score is MiniLM's own cosine of its two texts, and a text
    already encoded is not encoded again."""
    import siamese.decision.cascade as cascade

    model, _ = verifier
    monkeypatch.setattr(cascade, "_PAIR_CHUNK", 7)  # many chunks, the last one short
    texts = mqp.text1 + mqp.text2
    n = len(mqp)
    scorer = cascade.PairScorer(model, texts, model.threshold)
    rng = np.random.default_rng(0)
    want = np.einsum("ij,ij->i", model.encode(mqp.text1), model.encode(mqp.text2))
    seen = set()
    for rows in np.array_split(rng.permutation(n), 3):  # texts arrive in three calls, in no order
        got = scorer(rows, rows + n)
        np.testing.assert_allclose(got, want[rows], atol=2e-3)  # bf16 batches of other lengths: rounding
        seen |= set(rows.tolist()) | set((rows + n).tolist())
        assert scorer.encoded == len(seen) and scorer.scored == len(seen) // 2
    assert np.array_equal(scorer.rows, sorted(seen))
    before = scorer.encoded
    again = scorer(np.arange(n), np.arange(n) + n)  # every text known: nothing encoded
    assert scorer.encoded == before
    np.testing.assert_allclose(again, want, atol=2e-3)


def test_a_band_reaching_past_1_is_said_to_run_from_its_lower_edge_up():
    from siamese.cli.evaluate import _span
    from siamese.decision.cascade import Band

    assert _span(Band(0.4833, 1.1833)) == "from 0.4833 up"  # was "0.4833 to 1.1833", above any cosine
    assert _span(Band(0.6, 0.9)) == "0.6000 to 0.9000" and _span(Band(0.6, None)) == "from 0.6000 up"
