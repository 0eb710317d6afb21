"""Answer selection: TrecQA/WikiQA readers, triplets, MAP/MRR, and a small hinge-loss CNN that
ranks right answers above wrong ones on unseen questions, end to end from the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import invoke

from siamese.data.answers import Question, load_answers, make_triplets, ranking_report, read_trecqa
from siamese.errors import DataError


def test_readers_match_the_documented_counts(data_dir):
    trec = load_answers("trecqa-test", data_dir)
    assert len(trec) == 95 and sum(len(q.answers) for q in trec) == 1517 and sum(q.labels.sum() for q in trec) == 284
    assert sum(0 < q.labels.sum() < len(q.labels) for q in trec) == 68  # the standard "clean" test questions
    wiki = load_answers("wikiqa-test", data_dir)
    assert sum(len(q.answers) for q in wiki) == 2351 and sum(q.labels.sum() for q in wiki) == 293
    assert all(len(set(q.answers)) >= 1 and q.text for q in wiki)


def test_map_and_mrr_hand_computed():
    questions = [
        Question("q1", ["a", "b", "c"], np.array([0, 1, 1], dtype=np.int8)),
        Question("q2", ["d", "e"], np.array([1, 0], dtype=np.int8)),
        Question("q3", ["f"], np.array([1], dtype=np.int8)),
    ]  # no wrong answer: left out
    scores = {"a": 0.9, "b": 0.8, "c": 0.1, "d": 0.2, "e": 0.5, "f": 0.0}
    report = ranking_report(lambda qs, answers: [scores[a] for a in answers], questions)
    # q1: ranks a(0) b(1) c(1): AP = (1/2 + 2/3) / 2, RR = 1/2; q2: ranks e(0) d(1): AP = 1/2, RR = 1/2
    assert report["map"] == pytest.approx(((0.5 + 2 / 3) / 2 + 0.5) / 2)
    assert report["mrr"] == pytest.approx(0.5)
    assert report["questions"] == 2 and report["candidates"] == 5


def test_triplets_pair_every_right_answer_with_wrong_ones(data_dir):
    train = load_answers("trecqa-train", data_dir)
    t = make_triplets(train, negatives=3, seed=0)
    expected = sum(
        int(q.labels.sum()) * min(3, int((q.labels == 0).sum())) for q in train if 0 < q.labels.sum() < len(q.labels)
    )
    assert len(t) == expected
    by_question = {q.text: q for q in train}
    for a, p, n in list(zip(t.anchor, t.positive, t.negative))[:200]:
        q = by_question[a]
        assert q.labels[q.answers.index(p)] == 1 and q.labels[q.answers.index(n)] == 0


def test_bad_answer_files_name_file_and_line(tmp_path):
    bad = tmp_path / "qa.csv"
    bad.write_text("qtext,label,atext\nwho?,1,me\nwhy?,2,because\n")
    with pytest.raises(DataError, match=r"qa.csv:3: column label: expected 0 or 1, got '2'"):
        read_trecqa(bad)
    (tmp_path / "cols.csv").write_text("question,label,answer\nwho?,1,me\n")
    with pytest.raises(DataError, match="missing column"):
        read_trecqa(tmp_path / "cols.csv")


def test_cnn_hinge_ranks_unseen_questions_from_the_cli(data_dir, tmp_path):
    out = tmp_path / "sqam"
    r = invoke(
        "train",
        "--answers",
        "--data",
        str(data_dir / "trecqa/train.csv"),
        "--val-data",
        str(data_dir / "trecqa/dev.csv"),
        "--encoder",
        "cnn",
        "-o",
        "filters=100",
        "--dim",
        "50",
        "--glove",
        str(data_dir / "glove/glove-50d-5k.json"),
        "--epochs",
        "3",
        "--batch-size",
        "64",
        "--workers",
        "1",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["recipe"]["loss"] == "hinge" and result["validation_ranking"]["questions"] == 65
    r = invoke("evaluate-answers", str(out), "--data", str(data_dir / "trecqa/test.csv"), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    # random scores give MAP ~0.40 on these questions (mean over 20 shuffles); the model must rank better
    test = load_answers("trecqa-test", data_dir)
    rng = np.random.default_rng(0)
    chance = np.mean([ranking_report(lambda q, a: rng.random(len(a)), test)["map"] for _ in range(20)])
    assert report["questions"] == 68 and report["map"] > chance + 0.05, (report, chance)

    candidates = tmp_path / "candidates.txt"
    candidates.write_text("The Eiffel Tower is in Paris .\nBananas are yellow .\nParis is the capital of France .\n")
    r = invoke("rank", str(out), "What is the capital of France ?", "--candidates", str(candidates), "--json")
    assert r.returncode == 0, r.stderr
    ranked = json.loads(r.stdout)["ranked"]
    assert [h["rank"] for h in ranked] == [1, 2, 3] and sorted(h["candidate"] for h in ranked) == [1, 2, 3]
    assert ranked[0]["score"] >= ranked[1]["score"] >= ranked[2]["score"]
    r = invoke("rank", str(out), "q", "--candidates", str(tmp_path / "none.txt"))
    assert r.returncode == 2 and "none.txt: no such file" in r.stderr
