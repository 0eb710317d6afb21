"""The labelling page's "Learn from these answers": the pair choice after a learn, the session
carrying on with a learned model, the refusals, a failure in the thread, and a real fine-tune of
MiniLM on ~60 answers replayed from MQP, clicked in Chromium while labelling goes on."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SCRIPT, free_port, invoke
from test_label import TOPICS, call, corpus  # noqa: F401  (corpus: the fixture)

from siamese.errors import ConfigError, DataError, SiameseError
from siamese.label.learning import Learner, disagreement
from siamese.label.selection import Selector, pair_candidates
from siamese.label.session import LabelSession
from siamese.label.store import LabelStore
from siamese.training.learn import AUC_MARGIN

TOPIC = {t: k for k, texts in TOPICS.items() for t in texts}


# -- the choice after a learn --------------------------------------------------------------------


def test_disagreement_is_the_difference_of_ranks():
    old = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    assert disagreement(old, old * 2 + 1).tolist() == [0.0] * 5  # a new scale, the same order: no doubt
    flipped = disagreement(old, old[::-1].copy())
    assert flipped[0] == flipped[-1] == 1.0 and flipped[2] == 0.0


def test_after_a_learn_every_other_pair_is_the_most_disagreed_and_no_text_is_asked_twice_in_a_row():
    n = 200
    rng = np.random.default_rng(0)
    sims = rng.random(n)
    c = pair_candidates([f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], sims, range(n))
    # pairs 0..49 share their first text in fives: a0 (pairs 0-4), a5 (5-9), ...
    c.first = np.array([5 * (i // 5) if i < 50 else i for i in range(n)])
    sel = Selector(c, seed=0)
    doubt = rng.random(n) * 0.5
    doubt[[3, 4, 150]] = [0.99, 0.98, 0.97]
    done, unavailable = list(range(100, 120)), np.zeros(n, bool)
    unavailable[done] = True
    sel.learned(doubt, len(done))
    picks = []
    for _ in range(6):
        k = sel.choose(done, unavailable, 0.5, 0.05)
        if picks:  # never a text of the pair answered just before
            last = done[-1]
            assert not {c.first[k], c.second[k]} & {c.first[last], c.second[last]}
        picks.append(k)
        done.append(k)
        unavailable[k] = True
    assert picks[0] == 3  # the most disagreed
    assert picks[2] == 150  # 4 shares text a0 with 3, answered: a fresh one comes first
    before = done[:-2]  # what was answered when the fifth pick was made
    used = set(c.first[before].tolist()) | set(c.second[before].tolist())
    fresh = [k for k in range(n) if k not in before and c.first[k] not in used and c.second[k] not in used]
    assert picks[4] == max(fresh, key=lambda k: doubt[k])  # again the most disagreed fresh one
    assert all(doubt[p] < 0.9 for p in picks[1::2])  # the others: the usual choice near the threshold
    sel.learned(None, len(done))  # a model kept as it was: the usual choice only
    assert sel.choose(done, unavailable, 0.5, 0.05) is not None


def _session(model, tmp_path, texts=None) -> LabelSession:
    texts = texts or [t for ts in TOPICS.values() for t in ts]
    first, second = zip(*[(a, b) for i, a in enumerate(texts) for b in texts[i + 1 :]])
    sims = model.similarity_pairwise(list(first), list(second))
    c = pair_candidates(list(first), list(second), sims, range(1, len(first) + 1))
    return LabelSession(model, c, LabelStore(tmp_path / "labels.csv"), save_to=tmp_path / "labels-model")


def _answer(session, n_dup: int, n_not: int) -> None:
    """Answer ``n_dup`` more duplicates and ``n_not`` more others truthfully (topic = the oracle)."""
    want = {1: n_dup, 0: n_not}
    for n in range(len(session.c)):
        a, b = session.c.pair(n)
        y = int(TOPIC[a] == TOPIC[b])
        if want[y] > 0 and session.answer(n, y):
            want[y] -= 1


def test_the_session_carries_on_with_the_learned_model(corpus, tmp_path):  # noqa: F811
    from siamese import ModelConfig, SiameseModel

    old = SiameseModel.load(corpus / "model")
    session = _session(old, tmp_path)
    _answer(session, 6, 6)
    texts = [t for ts in TOPICS.values() for t in ts]
    new = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=32, seed=5))  # other vectors
    new.set_threshold(0.3)
    new.info["learned"] = {"chosen": "fine-tuned"}
    before = session.c.similarity.copy()
    learned_on = session.labelled_pairs()
    assert len(learned_on) == 12 and learned_on.labels.sum() == 6
    session.adopt(new, learned_on=learned_on)
    a, b = session.c.pair(7)
    assert session.c.similarity[7] == pytest.approx(float(new.similarity_pairwise([a], [b])[0]), abs=1e-5)
    assert not np.allclose(session.c.similarity, before)
    assert session.model is new and session.model_threshold == 0.3
    s = session.stats()
    assert s["answers"] == 0 and s["learned_on"] == 12 and s["model_threshold"] == 0.3  # seen answers count no more
    shown = session.next("t")
    assert shown["threshold"] == 0.3 and shown["threshold_from"] == "model"
    assert session.selector.disagreement is not None
    with pytest.raises(DataError, match="too few answers to save"):
        session.save()  # the calibration needs answers the learned model has not seen
    _answer(session, 2, 2)
    s = session.stats()
    assert s["answers"] == 4 and s["learned_on"] == 12  # the answers since the learn
    assert len(LabelStore(tmp_path / "labels.csv")) == 16  # every answer stays in the file


def test_a_model_kept_as_it_was_keeps_every_answer_counting(corpus, tmp_path):  # noqa: F811
    from siamese import SiameseModel

    session = _session(SiameseModel.load(corpus / "model"), tmp_path)
    _answer(session, 6, 6)
    before = session.c.similarity
    kept = SiameseModel.load(corpus / "model")
    kept.set_threshold(0.42)
    kept.info["learned"] = {"chosen": "as-is"}
    session.adopt(kept, learned_on=session.labelled_pairs(), same_vectors=True)
    assert session.c.similarity is before and session.selector.disagreement is None
    s = session.stats()
    assert s["answers"] == 12 and s["learned_on"] == 0 and s["model_threshold"] == 0.42


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 as a Siamese model folder (the shipped weights; nothing downloaded)."""
    from siamese.models.sentence_encoder import load_bi_encoder

    model = load_bi_encoder("minilm")
    model.set_threshold(0.7)
    return model.save(tmp_path_factory.mktemp("minilm") / "model")


@pytest.mark.slow
def test_learn_refuses_in_one_line_and_a_failure_in_the_thread_is_a_line(corpus, minilm, tmp_path):  # noqa: F811
    from siamese import SiameseModel

    bow = SiameseModel.load(corpus / "model")
    (tmp_path / "bow").mkdir()
    learner = Learner(_session(bow, tmp_path / "bow"), bow.path, tmp_path / "out")
    with pytest.raises(ConfigError, match="fine-tunes a pretrained transformer bi-encoder.*the bow encoder"):
        learner.start()
    model = SiameseModel.load(minilm)
    session = _session(model, tmp_path)
    learner = Learner(session, model.path, tmp_path / "learned")
    _answer(session, 3, 5)
    with pytest.raises(DataError, match=r"8 labelled pairs \(3 duplicates, 5 not\).*label 3 more duplicate\(s\)"):
        learner.start()
    assert learner.status()["state"] == "idle"
    with pytest.raises(SiameseError, match="the folder this command reads"):
        Learner(session, model.path, model.path).start()  # never over an input
    _answer(session, 12, 12)
    learner.source = corpus / "model"  # learning from a folder that is no transformer: fails in the thread
    assert learner.start()["state"] == "learning"
    learner.thread.join(120)
    state = learner.status()
    assert state["state"] == "failed" and "\n" not in state["message"] and "bow encoder" in state["message"]
    assert not (tmp_path / "learned").exists() and session.model is model  # nothing half-done


def test_learn_out_is_never_an_input_nor_the_save_folder(corpus, tmp_path):  # noqa: F811
    base = ["label", corpus / "model", "--data", corpus / "corpus.csv", "--out", tmp_path / "l.csv"]
    ran = invoke(*base, "--learn-out", corpus / "model")
    assert ran.returncode == 2 and "the folder this command reads" in ran.stderr and ran.stderr.count("\n") == 1
    ran = invoke(*base, "--learn-out", tmp_path / "m", "--save-to", tmp_path / "m")
    assert ran.returncode == 2 and "--learn-out" in ran.stderr and "--save-to" in ran.stderr


# -- a real fine-tune from the page, in Chromium ---------------------------------------------------


@pytest.fixture(scope="module")
def mqp_pairs(data_dir, tmp_path_factory) -> Path:
    """The first 240 medical question pairs (MQP), with their 0/1 answer in ``gold``."""
    rows = list(csv.DictReader(open(data_dir / "mqp" / "mqp.csv", newline="", encoding="utf-8")))[:240]
    path = tmp_path_factory.mktemp("mqp") / "pairs.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text1", "text2", "gold"])
        w.writerows((r["question_1"], r["question_2"], r["label"]) for r in rows)
    return path


@contextlib.contextmanager
def labelling_pairs(model, pairs, labels, *args):
    port = free_port()
    log = open(Path(labels).with_suffix(".log"), "a")
    proc = subprocess.Popen(
        [str(SCRIPT), "label", str(model), "--pairs", str(pairs), "--out", str(labels), "--port", str(port), *args],
        stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"label server did not start: {Path(log.name).read_text()}")
                time.sleep(0.3)
        yield base
    finally:
        proc.kill()
        proc.wait()
        log.close()


@pytest.mark.slow
def test_learn_from_60_mqp_answers_in_the_page_while_labelling_goes_on(minilm, mqp_pairs, browser, artifacts, tmp_path):
    from siamese import SiameseModel

    labels = tmp_path / "labels.csv"
    ran = invoke("label", minilm, "--pairs", mqp_pairs, "--out", labels, "--oracle-column", "gold", "--budget", "60")
    assert ran.returncode == 0, ran.stderr
    gold = {(r["text1"], r["text2"]): r["gold"] for r in csv.DictReader(open(mqp_pairs, encoding="utf-8"))}
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    with labelling_pairs(minilm, mqp_pairs, labels) as base:
        page.goto(base + "/")
        page.locator("#pair-body .text").first.wait_for()
        assert page.locator("#stats-body").get_attribute("data-answers") == "60"
        page.click("#learn")
        page.wait_for_function("() => document.getElementById('learned').dataset.state === 'learning'")
        assert page.locator("#learn").is_disabled()
        status, again = call(base, "/api/learn", {})  # a second click while it learns: refused politely
        assert status == 409 and "already learning" in again["detail"]
        # labelling goes on meanwhile: an answer is saved and the next pair comes
        _, shown = call(base, "/api/next?tab=side")
        pair = shown["pair"]
        label = "d" if gold[(pair["text1"], pair["text2"])] == "1" else "n"
        status, answered = call(base, "/api/answer", {"index": pair["index"], "label": label, "tab": "side"})
        assert status == 200 and answered["saved"] and answered["pair"] is not None
        learning = call(base, "/api/learn")[1]["learn"]
        assert learning["state"] == "learning", learning  # the answer came while it still learned
        page.wait_for_function(
            "() => ['done', 'failed'].includes(document.getElementById('learned').dataset.state)", timeout=600_000
        )
        said = page.locator("#learned").inner_text()
        page.screenshot(path=str(artifacts / "label-learned.png"), full_page=True)
        done = call(base, "/api/learn")[1]["learn"]
        assert done["state"] == "done", done
        (artifacts / "label-learned.json").write_text(json.dumps(done, indent=1))  # what it measured, for the record
        assert done["answers"] == 60 and str(tmp_path / "labels-learned") == done["path"]
        if done["chosen"] == "fine-tuned":
            assert f"held-out accuracy {100 * done['before']:.1f}% → {100 * done['after']:.1f}%" in said
            assert f"ranking (ROC-AUC) {done['auc_before']:.3f} → {done['auc_fine_tuned']:.3f}" in said
            assert done["after"] > done["before"] or done["auc_fine_tuned"] > done["auc_before"] + AUC_MARGIN
        else:
            assert said.startswith("Kept the model as it was") and done["after"] == done["before"]
        learned = SiameseModel.load(tmp_path / "labels-learned")
        info = learned.info["learned"]
        assert info["labels"] == 60 and info["chosen"] == done["chosen"]
        assert info["cross_validation"]["as_is"]["accuracy"] == pytest.approx(done["before"])
        _, now = call(base, "/api/next?tab=after")  # the pairs are now scored by the learned model
        pair, stats = now["pair"], now["stats"]
        expected = float(learned.similarity_pairwise([pair["text1"]], [pair["text2"]])[0])
        assert pair["similarity"] == pytest.approx(expected, abs=1e-4)
        assert stats["model_threshold"] == pytest.approx(learned.threshold)
        if done["chosen"] == "fine-tuned":  # the statistics count only the one answer it has not seen
            assert stats["learned_on"] == 60 and stats["answers"] == 1
            assert "since the model learned from the first 60" in page.locator("#stats-body").inner_text()
        else:  # kept as it was: it learned nothing from them
            assert stats["learned_on"] == 0 and stats["answers"] == 61
    assert len(LabelStore(labels)) == 61
    assert json.loads((minilm / "config.json").read_text())["info"].get("learned") is None  # the input untouched
    page.close()


def test_learning_again_starts_from_the_model_before_any_learning(corpus, tmp_path):  # noqa: F811
    from siamese import SiameseModel

    model = SiameseModel.load(corpus / "model")
    assert Learner.origin(model) == model.path  # a model never learned: its own folder
    model.info["learned"] = {"chosen": "fine-tuned"}
    model.info["pretrained"] = {"source": "x", "folder": str(corpus / "model")}
    learned = SiameseModel.load(model.save(tmp_path / "learned"))
    assert Learner.origin(learned) == corpus / "model"  # resumed with a learned model: the one it came from
    learned.info["pretrained"]["folder"] = str(tmp_path / "gone")
    assert Learner.origin(learned) == learned.path


def test_in_a_pair_file_a_text_is_known_by_its_words_not_its_row():
    # a pair file: "q" is the first text of rows 0-9 (ten places in the candidates' texts)
    first = ["q"] * 10 + [f"x{i}" for i in range(10)]
    second = [f"r{i}" for i in range(10)] + [f"y{i}" for i in range(10)]
    c = pair_candidates(first, second, np.linspace(0.5, 0.52, 20), range(20))
    sel = Selector(c, seed=0, warmup=0, explore_every=1000)
    done, unavailable = [0], np.zeros(20, bool)
    unavailable[0] = True
    for _ in range(10):
        k = sel.choose(done, unavailable, 0.51, 0.01)
        assert k >= 10, "a row asking about 'q' again came before a pair of new texts"
        done.append(k)
        unavailable[k] = True
