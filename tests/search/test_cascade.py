"""The cascade at corpus scale: a static student distilled from all-MiniLM-L6-v2 (made here by
``siamese distill`` under a pipe, whose progress lines are checked) proposes candidate pairs of
real InsuranceQA questions, and MiniLM decides them within a band chosen on a sample; its verdicts
agree with MiniLM's own dedupe, both scores are recorded, and only the band's texts are encoded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import assert_user_error, run, run_json

from siamese import ModelConfig, SiameseModel, read_texts
from siamese.errors import ConfigError
from siamese.models.sentence_encoder import from_pretrained
from siamese.search import DedupeRun, dedupe
from siamese.search.cascade import PROPOSE, best_links, choose_band

HEARTBEAT = 2.0  # seconds between progress lines in the run below (30 by default)


@pytest.fixture(scope="module")
def questions(data_dir) -> list[str]:
    return read_texts(data_dir / "insuranceqa/questions.csv", "question")


@pytest.fixture(scope="module")
def distilled(questions, tmp_path_factory):
    """``siamese distill`` on 10,000 questions with stderr a pipe: each stderr line with its arrival time."""
    folder = tmp_path_factory.mktemp("student")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(questions[:10_000]) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "siamese", "distill", "--data", str(corpus), "--out", str(folder / "model")]
    cmd += ["--dim", "128", "--epochs", "4", "--extra-words", "2000"]
    # the teacher in the precision `siamese distill` picks (bf16 on CPUs with native bf16), not the suite's fp32
    env = {k: v for k, v in os.environ.items() if k != "SIAMESE_PRECISION"}
    env.update(SIAMESE_PROGRESS_SECONDS=str(HEARTBEAT), HF_HUB_OFFLINE="1")
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend((time.perf_counter(), x) for x in proc.stderr))
    reader.start()
    out = proc.stdout.read()
    proc.wait()
    reader.join()
    assert proc.returncode == 0, "".join(x for _, x in lines[-20:])
    return folder / "model", started, time.perf_counter(), lines, out


@pytest.fixture(scope="module")
def student(distilled):
    return SiameseModel.load(distilled[0])


@pytest.fixture(scope="module")
def minilm():
    return from_pretrained("minilm")


def test_distill_under_a_pipe_says_where_it_is_at_every_heartbeat(distilled):
    _, started, ended, lines, _ = distilled
    beats = [(t, x) for t, x in lines if x.startswith("distill: ") and x.rstrip().endswith(" s)")]
    gaps = np.diff([t for t, _ in lines])
    assert ended - started > 4 * HEARTBEAT  # long enough for several beats
    assert len(beats) >= (ended - started) / HEARTBEAT / 3, [x for _, x in lines]
    # a line at the heartbeat's pace, and never 30 s without one (the default heartbeat) once it
    # beats; before it (imports) and after it (saving), well under a minute even on a loaded machine
    assert np.median(gaps) <= 1.5 * HEARTBEAT and gaps.max() < 30, gaps
    assert lines[0][0] - started < 60 and ended - lines[-1][0] < 60
    steps = " ".join(x for _, x in beats)
    assert "teacher: its own tokens" in steps and "/30," in steps  # counts: done/total of MiniLM's ~30,500 tokens
    assert any(x.startswith("distill epoch 2:") for _, x in lines)  # and a line per epoch of the student
    assert not any("\r" in x for _, x in lines)  # no bar redraws in a log


def test_the_cascade_decides_as_minilm_does_encoding_only_the_bands_texts(student, minilm, questions, tmp_path):
    texts = questions[:3000]
    own = dedupe(minilm, texts, tmp_path / "minilm")
    run = dedupe(student, texts, tmp_path / "cascade", verify=minilm)
    info = run.meta["verified"]
    assert info["verifier"] == "bi-encoder" and run.threshold == own.threshold == 0.9
    # the student proposed 50 per text; each text kept its 20 best, as MiniLM's own run examines 20
    assert (info["proposed_per_text"], info["links_per_text"], run.meta["k"]) == (PROPOSE, 20, 20)
    band = info["band"]
    assert band["agreement"] >= 0.99 and band["sampled"] > 100
    assert info["texts_encoded"] < len(set(texts))  # MiniLM reads only the texts of the pairs it decides
    ours = {(a, b) for a, b, _ in run.pairs.above(run.threshold)}
    theirs = {(a, b) for a, b, _ in own.pairs.above(own.threshold)}
    assert len(theirs) > 100
    assert len(ours & theirs) >= 0.95 * len(theirs) and len(ours & theirs) >= 0.95 * len(ours)
    # both scores per pair; where MiniLM decided, its score is its cosine of the two texts
    saved = DedupeRun.load(run.path)
    first, verifier = saved.stages["first_stage"], saved.stages["verifier"]
    asked = ~np.isnan(verifier)
    assert asked.sum() == info["verified"] > 0
    rows = np.flatnonzero(asked)[:200]
    direct = minilm.similarity_pairwise(
        [texts[i] for i in saved.pairs.first[rows]], [texts[j] for j in saved.pairs.second[rows]]
    )
    assert np.allclose(verifier[rows], direct, atol=0.02)
    assert np.allclose(saved.pairs.similarity[asked], verifier[asked])  # the verifier's score decides
    above = ~asked  # accepted without asking: the student was sure (above the band)
    assert np.all(first[above] > band["hi"]) and np.all(saved.pairs.similarity[above] > run.threshold)
    assert (run.threshold, band["lo"]) and saved.rethreshold(0.95)["pairs"] <= len(ours)
    with pytest.raises(ConfigError, match="a cascade's run is re-thresholded upward only"):  # not "a lower --floor"
        saved.rethreshold(0.8)


def test_best_links_keeps_a_pair_among_the_k_best_of_either_text():
    rng = np.random.default_rng(0)
    first, second = rng.integers(0, 40, 600), rng.integers(0, 40, 600)
    first, second = first[first != second], second[first != second]
    score = rng.random(len(first))
    kept = best_links(first, second, score, 3)
    for i in range(len(first)):  # brute force: the pair's rank among each of its texts' pairs
        ranks = [int((score[(first == x) | (second == x)] > score[i]).sum()) for x in (first[i], second[i])]
        assert kept[i] == (min(ranks) < 3)


def test_the_cli_takes_a_bi_encoder_for_verify_and_refuses_what_has_no_cosine(distilled, minilm, questions, tmp_path):
    data = tmp_path / "q.txt"
    data.write_text("\n".join(questions[:1500]) + "\n", encoding="utf-8")
    folder = minilm.save(tmp_path / "minilm")
    summary = run_json("dedupe", distilled[0], "--data", data, "--out", tmp_path / "run", "--verify", folder)
    assert summary["verified"]["verifier"] == "bi-encoder" and summary["threshold"] == 0.9
    fixed = tmp_path / "fixed"
    run("dedupe", distilled[0], "--data", data, "--out", fixed, "--verify", folder, "--verify-band", "0.05")
    band = DedupeRun.load(fixed).meta["verified"]["band"]
    assert band["lo"] == pytest.approx(0.85) and band["hi"] == pytest.approx(0.95)
    manhattan = SiameseModel.build(questions[:200], ModelConfig(head="manhattan", dim=16)).save(tmp_path / "l1")
    bad = run("dedupe", distilled[0], "--data", data, "--out", tmp_path / "bad", "--verify", manhattan, check_ok=False)
    assert_user_error(bad, "--verify takes a cosine bi-encoder or a cross-encoder", "manhattan")
    assert not (tmp_path / "bad").exists()


def test_the_python_api_takes_a_verifier_by_name(student, questions):
    import siamese

    found = siamese.dedupe(questions[:800], student, verify="minilm")
    assert found.threshold == 0.9 and found.clusters
    assert all(d.similarity > 0.9 for c in found.clusters for d in c.duplicates if d.exact_of is None)


def test_the_band_is_narrow_for_a_first_stage_that_ranks_as_the_verifier_and_wide_for_a_noisy_one():
    rng = np.random.default_rng(0)
    sims = rng.uniform(0.6, 1.0, 200_000).astype(np.float32)
    sharp, _, _ = choose_band(sims, lambda rows: sims[rows] > 0.85, floor=0.6)
    assert 0.83 <= sharp.lo <= 0.85 <= sharp.hi <= 0.87 and sharp.agreement >= 0.99
    noise = rng.normal(0, 0.05, len(sims))
    wide, _, _ = choose_band(sims, lambda rows: sims[rows] + noise[rows] > 0.85, floor=0.6)
    assert wide.lo < sharp.lo - 0.05 and (wide.hi is None or wide.hi > sharp.hi + 0.05)
    assert wide.agreement >= 0.98
    none, _, _ = choose_band(sims, lambda rows: np.zeros(len(rows), bool), floor=0.6)
    assert none.lo == 1.0 and none.agreement is None  # the verifier accepts nothing: nothing to verify


def test_the_bands_lower_edge_holds_still_between_samples_where_duplicates_are_rare():
    """As in a real corpus: most candidates score low, and the verifier's duplicates among them are
    0.03-2 % of a bin, which a bin's 48 sampled pairs read as 0 or >= 2 %: the lower edge moved from
    0.51 to 0.70 between samples of bench-dedupe-peers' half corpus (exact: 0.63)."""
    rng = np.random.default_rng(0)
    sims = (0.5 + 0.5 * rng.beta(1.0, 3.0, 400_000)).astype(np.float32)
    says = rng.random(len(sims)) < 1 / (1 + np.exp(-(sims - 0.8) / 0.025))  # the verifier's verdicts
    allowed = 0.005 * says.sum()  # agreement 0.99: half the disagreement under the band
    edges = np.round(np.arange(0.5, 1.0, 0.01), 2)
    exact = max(e for e in edges if says[sims < e].sum() <= allowed)
    for seed in range(8):
        band, _, _ = choose_band(sims, says.__getitem__, floor=0.5, seed=seed)
        assert abs(band.lo - exact) <= 0.021, (seed, band.lo, exact)
        assert says[sims < band.lo].sum() <= 2 * allowed  # duplicates the cascade never asks the verifier about
