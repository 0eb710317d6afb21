"""siamese label: the pair choice, the labels file, the statistics, the oracle replay and the HTTP API."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SCRIPT, assert_user_error, free_port, invoke
from conftest import call as json_call

from siamese.errors import ConfigError, DataError
from siamese.label import stats
from siamese.label.selection import Selector, pair_candidates
from siamese.label.store import COLUMNS, LabelStore, answer

TOPICS = {
    "password": ["how do I reset my password", "I forgot my password how to reset it", "reset password help",
                 "how can I change my password", "password reset link not working"],
    "refund": ["how do I get a refund", "can I get my money back", "refund for my order please",
               "how long does a refund take", "where is my refund"],
    "shipping": ["when will my order ship", "how long is shipping", "shipping time for my order",
                 "has my order shipped yet", "track my shipping order"],
    "account": ["how do I delete my account", "close my account please", "delete account permanently",
                "how to deactivate my account", "remove my account and data"],
    "invoice": ["where can I find my invoice", "download invoice for my order", "send me the invoice",
                "invoice is missing from my email", "I need a copy of my invoice"],
    "login": ["I cannot log in", "login fails with an error", "unable to sign in to my account",
              "log in page does not load", "why can I not login"],
}  # fmt: skip


def synthetic(n=2000, seed=0, centre=0.6, slope=30.0):
    """Similarities and labels with a known chance of a duplicate: 1 / (1 + exp(-slope·(s - centre)))."""
    rng = np.random.default_rng(seed)
    s = np.clip(rng.beta(2, 2, n), 0, 1)
    labels = (rng.random(n) < 1 / (1 + np.exp(-slope * (s - centre)))).astype(np.int64)
    return s, labels


def run_loop(sims, labels, budget, strategy="active", seed=0, texts=None):
    c = pair_candidates(
        [f"a{i}" for i in range(len(sims))], [f"b{i}" for i in range(len(sims))], sims, range(len(sims))
    )
    if texts is not None:
        c.texts = texts
    sel = Selector(c, strategy=strategy, seed=seed)
    done, unavailable = [], np.zeros(len(sims), bool)
    while len(done) < budget:
        t, width = stats.threshold(sims[done], labels[done])
        n = sel.choose(done, unavailable, t, width)
        if n is None:
            break
        done.append(n)
        unavailable[n] = True
    return done


# -- selection ------------------------------------------------------------------------------------


def test_selection_spreads_first_then_asks_near_the_threshold():
    sims, labels = synthetic()
    done = run_loop(sims, labels, 60)
    assert len(set(done)) == 60
    bands = Selector(pair_candidates(["x"] * 2000, ["y"] * 2000, sims, range(2000))).band
    assert len(set(bands[done[:8]].tolist())) == 8  # the warm-up: eight answers, eight similarity bands
    t, width = stats.threshold(sims[done], labels[done])
    assert abs(t - 0.6) < 0.03
    later = sims[done[30:]]
    near = np.abs(later - t) < 0.1
    assert near.mean() > 0.5  # most answers near the threshold...
    assert (~near).sum() >= 5  # ...and still some over the whole range, for the calibration


def test_selection_beats_random_labels_at_the_same_budget():
    sims, labels = synthetic(centre=0.75, seed=1)
    errors = {"active": [], "random": []}
    for seed in range(8):
        for strategy in errors:
            done = run_loop(sims, labels, 40, strategy, seed)
            errors[strategy].append(abs(stats.threshold(sims[done], labels[done])[0] - 0.75))
    assert np.mean(errors["active"]) < np.mean(errors["random"])


def test_selection_prefers_texts_not_seen_and_ends_when_none_is_left():
    # pairs 0..9 all share text 0 (one cluster); pairs 10..19 are of distinct texts
    texts = [f"t{i}" for i in range(40)]
    first = np.array([0] * 10 + list(range(10, 20)))
    second = np.array(list(range(20, 30)) + list(range(30, 40)))
    c = pair_candidates(["?"] * 20, ["?"] * 20, np.linspace(0.5, 0.52, 20), range(20))
    c.texts, c.first, c.second = texts, first, second
    sel = Selector(c, seed=0, warmup=0, explore_every=1000)
    done, unavailable = [0], np.zeros(20, bool)
    unavailable[0] = True
    for _ in range(10):
        n = sel.choose(done, unavailable, 0.51, 0.01)
        assert n >= 10, "a pair of the answered cluster came before a fresh one"
        done.append(n)
        unavailable[n] = True
    unavailable[:] = True
    assert sel.choose(done, unavailable, 0.51, 0.01) is None


# -- statistics -----------------------------------------------------------------------------------


def test_statistics_estimate_precision_and_recall_over_the_candidates():
    sims, labels = synthetic(n=4000, seed=3)
    done = run_loop(sims, labels, 150)
    s = stats.summary(sims[done], labels[done], sims, model_threshold=0.9, target_precision=0.9, resamples=60)
    t = s["threshold"]
    above = sims > t
    true_precision, true_recall = labels[above].mean(), labels[above].sum() / labels.sum()
    lo, hi = s["precision_interval"]
    assert lo - 0.03 <= true_precision <= hi + 0.03 and hi - lo < 0.25
    lo, hi = s["recall_interval"]
    assert lo - 0.03 <= true_recall <= hi + 0.03
    assert s["flags"] == int(above.sum()) and s["model_flags"] == int((sims > 0.9).sum())
    assert abs(labels[sims > s["target_threshold"]].mean() - 0.9) < 0.04  # the target precision, truly
    assert s["calibration"]["method"] in ("platt", "isotonic", "blend") and s["calibration"]["cv_ece"] < 0.15
    json.dumps(s, allow_nan=False)  # what the page receives: no NaN


def test_how_many_more_answers_comes_from_the_width_of_the_precisions_interval():
    assert stats.more_answers(30, [0.58, 0.83]) == 158  # 30 · (0.25 / 0.10)² = 187.5 answers in all
    assert stats.more_answers(200, [0.86, 0.95]) == 0  # already within ±5 points
    assert stats.more_answers(9, None) is None
    # the premise: the interval narrows as 1/√n, so the answers it asks for do pin it down
    sims, labels = synthetic(n=4000, seed=5)
    done = run_loop(sims, labels, 400)
    few = stats.summary(sims[done[:50]], labels[done[:50]], sims, model_threshold=0.9, resamples=100)
    wanted = few["more_answers"]
    assert few["precision_margin"] == 0.05 and 0 < wanted < 350, few
    many = stats.summary(sims[done[: 50 + wanted]], labels[done[: 50 + wanted]], sims, model_threshold=0.9)
    lo, hi = many["precision_interval"]
    assert hi - lo < 2 * 0.05 * 1.5, (hi - lo, wanted)  # about ±5 points (within the bootstrap's own noise)
    assert many["more_answers"] < wanted / 3


def test_threshold_flags_nothing_when_duplicates_never_outnumber_the_rest():
    # as on PAWS-QQP: whatever the similarity, about 3 in 10 pairs are duplicates
    rng = np.random.default_rng(0)
    sims = rng.random(300)
    labels = (rng.random(300) < 0.3).astype(np.int64)
    s = stats.summary(sims, labels, sims, model_threshold=0.5, resamples=20)
    assert s["threshold"] > sims.max() and s["flags"] == 0  # the most accurate cut: call nothing a duplicate


def test_statistics_before_both_labels():
    s = stats.summary([0.9, 0.8], [1, 1], [0.1, 0.5, 0.9], model_threshold=0.7)
    assert s["threshold"] is None and s["calibration"] is None and s["model_flags"] == 1


# -- the labels file ------------------------------------------------------------------------------


def test_store_appends_resumes_refuses_repeats_and_undoes(tmp_path):
    path = tmp_path / "labels.csv"
    store = LabelStore(path)
    assert store.add(answer("How are you?", "How  are you doing?", 1, "3", "7", 0.91))
    assert store.add(answer("a, b", 'quote " and\nnewline', 0, "1", "2", 0.2))
    assert not store.add(answer("How are you doing?", "How are you?", 0))  # the same pair, the other way round
    again = LabelStore(path)  # a restart reads the answers back
    assert [(a.text1, a.text2, a.label) for a in again.answers] == [
        ("How are you?", "How  are you doing?", 1),
        ("a, b", 'quote " and\nnewline', 0),
    ]
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMNS and rows[1][2:6] == ["1", "3", "7", "0.910000"]
    gone = again.undo()
    assert gone.text1 == "a, b" and len(LabelStore(path)) == 1
    store.refresh()  # the first store sees the undo (the file was replaced)
    assert len(store) == 1 and store.add(answer("a, b", 'quote " and\nnewline', 1))
    from siamese.data.pairs import read_pairs

    pairs = read_pairs(path)  # what train, calibrate and evaluate read
    assert pairs.labels.tolist() == [1, 1] and pairs.text2[1] == 'quote " and\nnewline'


def test_store_refuses_a_file_it_did_not_write(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("question,answer\nx,y\n")
    with pytest.raises(DataError, match="not a labels file"):
        LabelStore(other)
    assert other.read_text() == "question,answer\nx,y\n"
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(COLUMNS) + "\nx,y,2,,,,\n")
    with pytest.raises(DataError, match="row 2"):
        LabelStore(bad)


def test_store_two_threads_neither_duplicate_nor_lose(tmp_path):
    path = tmp_path / "labels.csv"
    stores = [LabelStore(path), LabelStore(path)]  # two writers of one file, as two processes would be
    won = [[], []]

    def work(w):
        for i in range(60):  # both answer pairs 20..59; each answers 20 of its own
            n = i if w == 0 else i + 40
            if stores[w].add(answer(f"q{n}", f"r{n}", n % 2, n, n, 0.5)):
                won[w].append(n)

    threads = [threading.Thread(target=work, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = LabelStore(path)
    keys = [a.text1 for a in final.answers]
    assert sorted(keys) == sorted(f"q{n}" for n in range(100)) and len(keys) == 100
    assert sorted(won[0] + won[1]) == list(range(100))


@pytest.mark.slow
def test_store_two_processes_neither_duplicate_nor_lose(tmp_path):
    path = tmp_path / "labels.csv"
    code = (
        "import sys; from siamese.label.store import LabelStore, answer\n"
        "s = LabelStore(sys.argv[1]); start = int(sys.argv[2])\n"
        "print(sum(s.add(answer(f'q{n}', f'r{n}', 1, n, n, 0.5)) for n in range(start, start + 150)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), str(start)], stdout=subprocess.PIPE, text=True, env=env
        )
        for start in (0, 100)
    ]
    written = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(written) == 250  # pairs 100..149 were offered by both, written once
    assert sorted(a.text1 for a in LabelStore(path).answers) == sorted(f"q{n}" for n in range(250))


# -- the command: oracle replay, errors -----------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A help-desk corpus (topic = the oracle) and an untrained bag-of-words model (quick, and its
    similarity follows shared words)."""
    from siamese import ModelConfig, SiameseModel

    folder = tmp_path_factory.mktemp("label")
    rows = [(text, topic) for topic, texts in TOPICS.items() for text in texts]
    with open(folder / "corpus.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "topic"])
        w.writerows(rows)
    texts = [t for t, _ in rows]
    model = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=32, seed=0))
    model.set_threshold(0.5)
    model.save(folder / "model")
    return folder


def test_oracle_replay_writes_and_resumes(corpus, tmp_path):
    labels = tmp_path / "labels.csv"
    args = ["label", corpus / "model", "--data", corpus / "corpus.csv", "--column", "text", "--out", labels]
    ran = invoke(*args, "--oracle-column", "topic", "--budget", "12", "--json", "-k", "4")
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["answers"] == 12 and result["candidates"] > 12
    topic = {t: k for k, texts in TOPICS.items() for t in texts}
    with open(labels, newline="", encoding="utf-8") as f:
        first = list(csv.DictReader(f))
    assert len(first) == 12
    assert all(int(r["label"]) == (topic[r["text1"]] == topic[r["text2"]]) for r in first)
    ran = invoke(*args, "--oracle-column", "topic", "--budget", "20", "-k", "4")  # the same command resumes
    assert ran.returncode == 0, ran.stderr
    with open(labels, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[:12] == first and len(rows) == 20
    assert len({tuple(sorted((r["text1"], r["text2"]))) for r in rows}) == 20


def test_the_python_api_opens_and_replays_a_session_as_the_command_does(corpus, tmp_path):
    """siamese.label.run: open_session + replay_run are `siamese label ... --oracle-column` without the command."""
    from siamese.label.run import open_session, replay_run

    args = ["label", corpus / "model", "--data", corpus / "corpus.csv", "--column", "text", "-k", "4"]
    ran = invoke(*args, "--out", tmp_path / "cli.csv", "--oracle-column", "topic", "--budget", "12", "--json")
    assert ran.returncode == 0, ran.stderr
    session, columns = open_session(
        corpus / "model", tmp_path / "py.csv", data=corpus / "corpus.csv", column="text", k=4, progress=False
    )
    assert session.learner is not None and session.source == str(corpus / "corpus.csv")
    report = replay_run(session, columns, "topic", 12, progress=False)
    assert {k: v for k, v in report.result.items() if k != "labels"} == {
        k: v for k, v in json.loads(ran.stdout).items() if k != "labels"
    }
    with pytest.raises(ConfigError, match="give --data CORPUS"):
        open_session(corpus / "model", tmp_path / "x.csv")
    assert not (tmp_path / "x.csv").exists()


def test_oracle_replay_of_given_pairs(corpus, tmp_path):
    pairs = tmp_path / "pairs.csv"
    with open(pairs, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text1", "text2", "gold"])
        for i, (a, b) in enumerate(zip(TOPICS["refund"] + TOPICS["login"], TOPICS["refund"][::-1] + TOPICS["invoice"])):
            w.writerow([a, b, int(i < 5)])
    labels = tmp_path / "labels.csv"
    ran = invoke(
        "label", corpus / "model", "--pairs", pairs, "--out", labels, "--oracle-column", "gold", "--budget", "6"
    )
    assert ran.returncode == 0, ran.stderr
    with open(labels, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and all(r["label"] == str(int(int(r["id1"]) - 1 <= 5)) for r in rows)


def test_oracle_labels_are_checked_whole_first_and_the_out_folder_made_only_to_write(corpus, tmp_path):
    """--pairs' oracle column is read as pair files' labels are (0/1, true/false, yes/no), every row checked before the
    first answer, a bad one named FILE:LINE as read_pairs names it; --out's missing folders are made, as train --out
    makes its own, but only by the first answer: a command that stops before leaves nothing."""
    pairs = tmp_path / "pairs.csv"
    said = ["yes", "Yes", "Y", "true", "1", "no", "No", "n", "false", "0", "maybe"]
    texts = list(
        zip(
            TOPICS["refund"] + TOPICS["login"] + ["close my account"],
            TOPICS["refund"][::-1] + TOPICS["invoice"] + ["remove my account"],
        )
    )
    assert len(texts) == len(said)
    with open(pairs, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text1", "text2", "gold"), *[(a, b, y) for (a, b), y in zip(texts, said)]])
    labels = tmp_path / "lab" / "deeper" / "labels.csv"
    args = ["label", corpus / "model", "--pairs", pairs, "--out", labels, "--oracle-column", "gold", "--budget", "4"]
    line = assert_user_error(invoke(*args))  # 'maybe' is on the last line, which a budget of 4 never reaches
    assert line == f"error: {pairs}:12: column 'gold': label must be 0/1, true/false or yes/no, got 'maybe'"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.csv"]  # no labels file, no folder
    # checked before the model is loaded and the pairs are encoded: a missing model is not even reached
    assert_user_error(invoke("label", tmp_path / "nomodel", *args[2:]), f"{pairs}:12: column 'gold'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.csv"]
    pairs.write_text(pairs.read_text().replace(",maybe", ",no"))
    ran = invoke(*args)
    assert ran.returncode == 0, ran.stderr
    with open(labels, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(r["label"] == str(int(int(r["id1"]) <= 6)) for r in rows)  # yes on lines 2-6


def test_command_errors_are_one_line(corpus, tmp_path):
    base = ["label", corpus / "model", "--out", tmp_path / "l.csv"]
    ran = invoke(*base, "--data", corpus / "corpus.csv", "--pairs", corpus / "corpus.csv")
    assert ran.returncode == 2 and ran.stderr.startswith("error: give --data")
    ran = invoke("label", corpus / "model", "--data", corpus / "corpus.csv", "--out", corpus / "corpus.csv")
    assert ran.returncode == 2 and "this command's input" in ran.stderr
    ran = invoke(*base, "--data", corpus / "corpus.csv", "--column", "text", "--oracle-column", "nope", "--budget", "3")
    assert ran.returncode == 2 and "no oracle column 'nope'" in ran.stderr
    not_labels = tmp_path / "notes.csv"
    not_labels.write_text("my,own\nfile,here\n")
    ran = invoke("label", corpus / "model", "--data", corpus / "corpus.csv", "--out", not_labels)
    assert ran.returncode == 2 and "not a labels file" in ran.stderr and not_labels.read_text() == "my,own\nfile,here\n"


# -- the HTTP API, on a real server ---------------------------------------------------------------


@contextlib.contextmanager
def labelling(model, corpus_file, labels, *args, port=None):
    """``siamese label`` in a subprocess on 127.0.0.1; yields (base URL, process)."""
    port = port or free_port()
    folder = Path(labels).parent
    while not folder.exists():  # --out in a folder the first answer makes
        folder = folder.parent
    log = open(folder / (Path(labels).stem + ".log"), "a")
    proc = subprocess.Popen(
        [str(SCRIPT), "label", str(model), "--data", str(corpus_file), "--column", "text", "--out", str(labels),
         "-k", "4", "--port", str(port), *args],
        stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"label server did not start: {Path(log.name).read_text()}")
                time.sleep(0.2)
        yield base, proc
    finally:
        proc.kill()
        proc.wait()
        log.close()


def page_token(base: str) -> str:
    """The run's token, as the page finds it in itself."""
    page = urllib.request.urlopen(base + "/", timeout=30).read().decode()
    return re.search(r'<meta name="siamese-token" content="([^"]+)">', page).group(1)


def call(base, path, body=None, *, token=True, headers=()):
    """conftest's JSON request, with the page's token unless ``token`` is False."""
    sent = {**({"X-Siamese-Token": page_token(base)} if token else {}), **dict(headers)}
    return json_call(base, path, body, headers=sent)


PAIR_FIELDS = {"index", "text1", "text2", "id1", "id2", "similarity", "threshold", "threshold_from", "duplicate"}
STATS_FIELDS = set(
    "answers duplicates candidates model_threshold model_flags target_precision learned_on threshold calibration "
    "precision recall flags precision_interval recall_interval precision_margin more_answers target_threshold "
    "target_recall target_flags".split()
)


def documented_example() -> str:
    """The Python example of docs/labelling.md's "HTTP API" section."""
    text = (REPO / "docs" / "labelling.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text[text.index("## HTTP API") :], re.S)[1]


@pytest.mark.slow
def test_http_api_answers_undo_two_tabs_and_save(corpus, tmp_path):
    """Every call docs/labelling.md's "HTTP API" documents, as it documents them (its example too)."""
    labels = tmp_path / "lab" / "labels.csv"  # its folder is made by the first answer
    with labelling(corpus / "model", corpus / "corpus.csv", labels) as (base, _):
        assert json_call(base, "/health")[1]["answers"] == 0  # no token needed
        _, a = call(base, "/api/next?tab=a")
        assert set(a) == {"pair", "stats", "labels"} and set(a["pair"]) == PAIR_FIELDS
        assert a["labels"] == str(labels) and set(a["stats"]) <= STATS_FIELDS
        _, b = call(base, "/api/next?tab=b")
        assert a["pair"]["index"] != b["pair"]["index"]  # two tabs are shown different pairs
        _, again = call(base, "/api/next?tab=a")
        assert again["pair"]["index"] == a["pair"]["index"]  # a reload shows the same pair
        # a skip: not written, and said so
        _, shown = call(base, "/api/next?tab=s")
        status, skipped = call(base, "/api/answer", {"index": shown["pair"]["index"], "label": "s", "tab": "s"})
        assert status == 200 and skipped["saved"] is False and skipped["skipped"] is True
        assert skipped["stats"]["answers"] == 0 and skipped["pair"]["index"] != shown["pair"]["index"]
        assert not labels.parent.exists()  # nothing written yet, not even the folder
        status, done = call(base, "/api/answer", {"index": a["pair"]["index"], "label": "d", "tab": "a"})
        assert status == 200 and done["saved"] is True and done["skipped"] is False and done["stats"]["answers"] == 1
        assert len(LabelStore(labels)) == 1  # on disk, its folder made, before the answer came back
        # both tabs answer the same pair at once: one row
        index = b["pair"]["index"]
        results = []

        def both(tab):
            results.append((tab, *call(base, "/api/answer", {"index": index, "label": "n", "tab": tab})))

        threads = [threading.Thread(target=both, args=(t,)) for t in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r[2]["saved"] for r in results) == [False, True]
        assert len(LabelStore(labels)) == 2
        winner = next(tab for tab, _, r in results if r["saved"])
        status, undone = call(base, "/api/undo", {"tab": winner})  # a tab undoes its own last answer
        assert status == 200 and undone["pair"]["index"] == index and undone["stats"]["answers"] == 1
        assert undone["undone"] is True
        assert call(base, "/api/undo", {"tab": "never answered"})[0] == 409
        topic = {t: k for k, texts in TOPICS.items() for t in texts}
        pair = undone["pair"]
        for _ in range(30):  # answer truthfully until the calibration can be fitted
            label = "d" if topic[pair["text1"]] == topic[pair["text2"]] else "n"
            _, state = call(base, "/api/answer", {"index": pair["index"], "label": label, "tab": "a"})
            pair = state["pair"]
            if state["stats"]["calibration"] is not None:
                break
        assert set(state["stats"]["calibration"]) == {"method", "cv_log_loss", "cv_ece"}
        assert set(state["stats"]) <= STATS_FIELDS and "precision" in state["stats"]
        status, saved = call(base, "/api/save", {"choice": "fitted"})
        assert status == 200, saved
        assert set(saved) == {"saved", "stats"} and set(saved["saved"]) == {"path", "threshold", "calibration", "next"}
        # learning: a bag-of-words model cannot, in one line
        assert call(base, "/api/learn") == (200, {"learn": {"state": "idle"}})
        status, body = call(base, "/api/learn", {})
        assert status == 422 and "bow encoder" in body["detail"]
        # bad requests are 4xx, never 5xx; only this page's token, only this machine's names
        assert call(base, "/api/answer", {"index": 10**6, "label": "d"})[0] == 422
        assert call(base, "/api/answer", {"index": 0, "label": "x"})[0] == 422
        assert call(base, "/api/save", {"choice": "nope"})[0] == 422
        assert call(base, "/api/learn", {}, token=False)[0] == 403
        assert call(base, "/api/next", token=False, headers={"X-Siamese-Token": "guessed"})[0] == 403
        assert call(base, "/api/learn", {}, headers={"Host": "evil.example"})[0] == 421
        page = urllib.request.urlopen(base + "/")
        assert "script-src 'sha256-" in page.headers["content-security-policy"]
        answers = len(LabelStore(labels))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(documented_example().replace("http://127.0.0.1:8000", base), {})
        assert printed.getvalue().startswith(f"True {answers + 1} {{")  # saved, counted, and the next pair
        assert len(LabelStore(labels)) == answers + 1
    from siamese import SiameseModel

    model = SiameseModel.load(saved["saved"]["path"])
    assert model.threshold == pytest.approx(saved["saved"]["threshold"])
    assert model.calibrator is not None and model.info["threshold_choice"]["by"] == "label"
    assert Path(saved["saved"]["path"]) == tmp_path / "lab" / "labels-model"
    assert SiameseModel.load(corpus / "model").calibrator is None  # the input model is untouched
