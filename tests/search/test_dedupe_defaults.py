"""Dedupe defaults on a real question bank (InsuranceQA) with the pretrained MiniLM: greedy clusters
that do not chain, a corpus threshold that does not flag most of the bank, --explain after a
re-threshold listing only the pairs accepted there, and thresholds rounded in the text output."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run, run_json

from siamese import read_texts
from siamese.search import DedupeRun, dedupe
from siamese.search.pairs import clusters, duplicate_pairs
from siamese.search.reuse import KnownVectors
from siamese.search.run import DEDUPE_MIN_THRESHOLD

PAIR_THRESHOLD = 0.8112  # what MiniLM's threshold comes to on the shared validation sets (accuracy)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    from siamese.models.sentence_encoder import from_pretrained

    model = from_pretrained("minilm")
    model.set_threshold(PAIR_THRESHOLD)
    model.save(tmp_path_factory.mktemp("minilm") / "model")
    return model


@pytest.fixture(scope="module")
def bank(data_dir, minilm, tmp_path_factory):
    """The first 3,000 questions, deduped with the defaults: (texts, each text's vector, the run).
    MiniLM encodes them once, there; the vectors are the run's, which the commands below reuse."""
    texts = read_texts(data_dir / "insuranceqa/questions.csv", "question")[:3000]
    run_ = dedupe(minilm, texts, tmp_path_factory.mktemp("bank") / "run")
    known = KnownVectors.open(run_.path, minilm)
    vectors = known.take(texts, lambda missing: pytest.fail(f"{len(missing)} texts without a vector in the run"))
    return texts, vectors, run_


def test_greedy_clusters_do_not_chain_where_components_do(bank):
    texts, vectors, _ = bank
    pairs = duplicate_pairs(vectors, PAIR_THRESHOLD, k=20, kind="flat")
    chained = clusters(len(texts), pairs, "components")
    greedy = clusters(len(texts), pairs, "greedy")
    assert len(chained[0]) > 500  # one chain swallows a good part of the bank
    assert len(greedy[0]) < 50
    kept = {g[0] for g in greedy}
    for group in greedy:
        assert group[0] == min(group)  # the kept record is the cluster's first in the input
        assert (vectors[group[1:]] @ vectors[group[0]] > PAIR_THRESHOLD).all()  # every member near its kept one
    # no kept record duplicates an earlier kept record (among the candidate pairs)
    links = pairs.above(PAIR_THRESHOLD)
    assert not any(a in kept and b in kept for a, b, _ in links)
    rows = [x for g in greedy for x in g]
    assert len(rows) == len(set(rows))


def test_default_threshold_is_strict_enough_for_a_question_bank(bank, minilm, tmp_path):
    texts, _, run_ = bank  # dedupe(minilm, texts) with every default
    summary = run_.summary()
    assert summary["threshold"] == DEDUPE_MIN_THRESHOLD == 0.9 and summary["clustering"] == "greedy"
    removed = sum(c.size - 1 for c in run_.clusters())
    assert removed / len(texts) < 0.3
    assert max(c.size for c in run_.clusters()) < 20
    # a model whose own threshold is stricter keeps it
    minilm.set_threshold(0.95)
    try:
        strict = dedupe(minilm, texts[:300], tmp_path / "strict", reuse=KnownVectors.open(run_.path, minilm))
        assert strict.summary()["threshold"] == pytest.approx(0.95)
    finally:
        minilm.set_threshold(PAIR_THRESHOLD)


@pytest.mark.parametrize("clustering", ["components", "greedy"])
def test_explain_after_rethreshold_lists_only_accepted_pairs(minilm, bank, tmp_path, clustering):
    texts, _, bank_run = bank
    data = tmp_path / "questions.txt"
    data.write_text("\n".join(texts[:2000]) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    folder = minilm.path
    common = ("--data", data, "--out", out, "--threshold", 0.85, "--clusters", clustering, "-q")
    reused = run_json("dedupe", folder, *common, "--reuse", bank_run.path)["reused"]
    assert reused == {"from": str(bank_run.path), "vectors": 2000}  # MiniLM's vectors, not encoded again
    again = run_json("dedupe", out, "--rethreshold", 0.95, "--explain", "--explain-count", 50)
    sims = [p["similarity"] for p in again["least_similar"]]
    assert len(sims) == 50 and min(sims) > 0.95
    assert sims == sorted(sims)
    text = run("dedupe", out, "--rethreshold", 0.9312345, "--explain", "--explain-count", 2).stdout
    assert " at 0.931; " in text and "0.9312345" not in text
    assert json.loads((out / "result.json").read_text())["threshold"] == 0.9312345  # full precision kept
    for line in text.splitlines()[1:]:
        assert float(line.split()[0]) >= 0.931
    assert DedupeRun.load(out).clustering == clustering
    assert np.isfinite(sims).all()
