"""Dedupe like the best tools: against a reference set, records with ids and columns, exact copies,
the least similar accepted pairs, re-thresholding a saved run; on real questions and real FAISS indexes."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import assert_user_error, run, run_json

from siamese import read_texts
from siamese.errors import ConfigError
from siamese.search import DedupeRun, DuplicateIndex, dedupe, dedupe_against, normalise, read_records


@pytest.fixture(scope="module")
def quora(data_dir, tmp_path_factory):
    """The Quora sample split into two files: the first questions (the reference, a training set) and
    the second questions (new texts), each CSV keeping its ids and label, plus planted copies of
    reference questions in the new file (whitespace changed: exact duplicates)."""
    with open(data_dir / "quora/quora_question_pairs_sample300.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    folder = tmp_path_factory.mktemp("quora")
    with open(folder / "reference.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["qid", "question", "pair"])
        w.writerows([r["qid1"], r["question1"], r["id"]] for r in rows)
    planted = rows[::30]  # 10 of them
    with open(folder / "new.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["qid", "question", "is_duplicate"])
        w.writerows([r["qid2"], r["question2"], r["is_duplicate"]] for r in rows)
        w.writerows([f"copy-{r['qid1']}", "  " + r["question1"].replace(" ", "\t ", 1) + " ", "copy"] for r in planted)
    return folder, rows, planted


def test_against_a_reference_matches_brute_force_and_finds_planted_duplicates(trained, quora, tmp_path):
    folder, rows, planted = quora
    model = trained.model
    new, ref = (
        read_records(folder / "new.csv", "question", "qid"),
        read_records(folder / "reference.csv", "question", "qid"),
    )
    t = 0.8
    found = dedupe_against(model, new, ref, tmp_path / "run", threshold=t, k=5)
    flagged = {f.record.id: f for f in found.flagged()}

    # exact copies: linked to the reference question they repeat, similarity 1, and not encoded
    for r in planted:
        match = flagged[f"copy-{r['qid1']}"].matches[0]
        assert (match.record.id, match.exact_of, match.similarity) == (r["qid1"], r["qid1"], 1.0)
    # every other flag is what brute force over all the reference says (flat index: exact)
    vectors_new = model.encode([r.text for r in new[: len(rows)]])
    vectors_ref = model.encode([r.text for r in ref])
    sims = vectors_new @ vectors_ref.T
    expected = {new[i].id for i in np.flatnonzero(sims.max(1) > t)}
    assert {i for i in flagged if not i.startswith("copy-")} == expected
    for i in np.flatnonzero(sims.max(1) > t)[:50]:
        f = flagged[new[i].id]
        best = np.sort(sims[i])[::-1]
        assert [m.similarity for m in f.matches] == pytest.approx(
            best[: len(f.matches)][best[: len(f.matches)] > t], abs=1e-5
        )

    # the real duplicates (is_duplicate=1) find their partner question far more often than a shifted one
    def found(partner_of) -> float:
        hits = [
            r["qid2"] in flagged and any(m.record.id == partner_of(n) for m in flagged[r["qid2"]].matches)
            for n, r in enumerate(rows)
            if r["is_duplicate"] == "1"
        ]
        return float(np.mean(hits))

    assert found(lambda n: rows[n]["qid1"]) > 0.1 > 3 * found(lambda n: rows[(n + 7) % len(rows)]["qid1"])
    # ids and columns are kept on both sides
    some = flagged[next(iter(expected))]
    assert set(some.record.columns) == {"is_duplicate"} and set(some.matches[0].record.columns) == {"pair"}


def test_against_an_index_folder_and_the_cli(model_path, trained, quora, tmp_path):
    folder, rows, planted = quora
    idx = tmp_path / "idx"
    run_json(
        "index", "build", model_path, "--data", folder / "reference.csv", "--column", "question", "--out", idx, "-q"
    )
    out = run_json(
        "dedupe",
        model_path,
        "--data",
        folder / "new.csv",
        "--column",
        "question",
        "--id-column",
        "qid",
        "--against",
        idx,
        "--out",
        tmp_path / "run",
        "--threshold",
        0.8,
        "--explain",
        "-q",
    )
    from_file = dedupe_against(
        trained.model,
        read_records(folder / "new.csv", "question", "qid"),
        read_texts(folder / "reference.csv", "question"),
        tmp_path / "api",
        threshold=0.8,
    )
    assert out["mode"] == "against" and out["flagged"] == from_file.summary()["flagged"] > len(planted)
    assert out["exact_matches"] == len(planted)
    lines = [json.loads(line) for line in (tmp_path / "run" / "matches.jsonl").read_text().splitlines()]
    assert len(lines) == out["flagged"]
    copy = next(x for x in lines if x["id"].startswith("copy-"))
    assert copy["columns"] == {"is_duplicate": "copy"} and copy["matches"][0]["exact_of"] == copy["matches"][0]["id"]
    # the index's ids are its row positions: the matched question is that row of the reference file
    assert copy["matches"][0]["text"] == rows[int(copy["matches"][0]["id"])]["question1"]
    least = out["least_similar"]
    assert len(least) == 10 and [p["similarity"] for p in least] == sorted(p["similarity"] for p in least)
    assert all(p["similarity"] > 0.8 for p in least)
    assert least[0]["similarity"] == min(m["similarity"] for x in lines for m in x["matches"] if "exact_of" not in m)


def _texts_with_copies(corpus: list[str], n: int) -> tuple[list[str], dict[int, int]]:
    """``n`` real questions, then copies of every 50th with their whitespace changed: copy row -> original row."""
    texts = list(corpus[:n])
    copies = {}
    for i in range(0, n, 50):
        copies[len(texts)] = i
        texts.append(texts[i].replace(" ", "  ") + "\n")
    return texts, copies


def test_self_dedupe_links_exact_copies_encoded_once(trained, data_dir, tmp_path, monkeypatch):
    corpus = read_texts(data_dir / "insuranceqa/questions.csv", "question")
    texts, copies = _texts_with_copies(corpus, 2000)
    encoded = []
    original = trained.model.encode
    monkeypatch.setattr(trained.model, "encode", lambda t, **kw: encoded.append(len(t)) or original(t, **kw))
    result = dedupe(trained.model, texts, tmp_path / "run", threshold=0.95)
    assert encoded == [len({normalise(t) for t in corpus[:2000]})]  # each distinct text once
    clusters = result.clusters()
    where = {d.record.row: (c, d) for c in clusters for d in c.duplicates}
    for copy, first in copies.items():
        cluster, dup = where[copy]
        linked = cluster.kept if cluster.kept.row == first else where[first][1].record
        assert linked.row == first and dup.exact_of == linked.id
        assert dup.similarity == (1.0 if cluster.kept.row == first else where[first][1].similarity)
    # each duplicate's similarity is its cosine to the kept record
    vectors = original(texts[:2000])
    for c in clusters[:20]:
        for d in c.duplicates:
            source = copies.get(d.record.row, d.record.row)
            assert d.similarity == pytest.approx(float(vectors[source] @ vectors[c.kept.row]), abs=1e-5)
    lines = (tmp_path / "run" / "clusters.jsonl").read_text().splitlines()
    assert len(lines) == len(clusters) == result.summary()["clusters"]
    assert result.summary()["exact_duplicates"] == len(copies)


def test_csv_ids_and_columns_are_kept(trained, data_dir, tmp_path):
    src = tmp_path / "questions.csv"
    with (
        open(data_dir / "insuranceqa/questions.csv", encoding="utf-8", newline="") as f,
        open(src, "w", encoding="utf-8", newline="") as out,
    ):
        reader, writer = csv.reader(f), csv.writer(out)
        for n, row in enumerate(reader):
            if n > 3000:
                break
            writer.writerow(row)
    records = read_records(src, "question", "qid")
    assert records[0].id == "0" and records[0].columns == {
        "split": "train",
        "domain": "medicare-insurance",
        "answer_ids": "16696",
    }
    result = dedupe(trained.model, records, tmp_path / "run", threshold=0.95, clustering="communities")
    by_id = {r.id: r for r in records}
    for line in (tmp_path / "run" / "clusters.jsonl").read_text().splitlines():
        c = json.loads(line)
        assert c["columns"] == by_id[c["id"]].columns and c["text"] == by_id[c["id"]].text
        assert all(d["columns"] == by_id[d["id"]].columns for d in c["duplicates"])
        assert all(d["similarity"] > 0.95 for d in c["duplicates"])  # communities: all above, to the centre
    assert result.summary()["clusters"] > 0
    # the default ids are the row numbers in the file
    assert [r.id for r in read_records(src, "question")[:3]] == ["1", "2", "3"]


@pytest.mark.parametrize("clustering", ["greedy", "components", "communities"])
def test_rethreshold_equals_a_fresh_run(trained, data_dir, tmp_path, clustering):
    texts, _ = _texts_with_copies(read_texts(data_dir / "insuranceqa/questions.csv", "question"), 3000)
    first = dedupe(trained.model, texts, tmp_path / "low", threshold=0.9, floor=0.85, clustering=clustering)
    low = (tmp_path / "low" / "clusters.jsonl").read_text()
    summary = DedupeRun.load(tmp_path / "low").rethreshold(0.95)
    fresh = dedupe(trained.model, texts, tmp_path / "fresh", threshold=0.95, clustering=clustering)
    assert (
        (tmp_path / "low" / "clusters.jsonl").read_text() == (tmp_path / "fresh" / "clusters.jsonl").read_text() != low
    )
    assert {k: v for k, v in summary.items() if k not in ("out", "floor")} == {
        k: v for k, v in fresh.summary().items() if k not in ("out", "floor")
    }
    # down again to the first threshold, still without encoding: the first results come back
    DedupeRun.load(tmp_path / "low").rethreshold(0.9)
    assert (tmp_path / "low" / "clusters.jsonl").read_text() == low
    assert first.least_similar(5) == DedupeRun.load(tmp_path / "low").least_similar(5)


def test_rethreshold_against_equals_a_fresh_run(trained, quora, tmp_path):
    folder, _, _ = quora
    new, ref = (
        read_records(folder / "new.csv", "question", "qid"),
        read_records(folder / "reference.csv", "question", "qid"),
    )
    dedupe_against(trained.model, new, ref, tmp_path / "low", threshold=0.7, floor=0.6)
    DedupeRun.load(tmp_path / "low").rethreshold(0.85)
    fresh = dedupe_against(trained.model, new, ref, tmp_path / "fresh", threshold=0.85)
    assert (tmp_path / "low" / "matches.jsonl").read_text() == (tmp_path / "fresh" / "matches.jsonl").read_text()
    assert 0 < fresh.summary()["flagged"] < len(new)


def test_a_file_read_by_the_python_api_has_the_clis_ids(model_path, data_dir, tmp_path):
    """siamese.dedupe(path) reads a file as `siamese dedupe --data` does: the same ids (row numbers from 1, or
    --id-column's values) and columns. A column named like ids that was not asked for is said in one line."""
    import siamese

    rows = (data_dir / "insuranceqa/questions.csv").read_text(encoding="utf-8").splitlines()[1:301]
    texts = [next(csv.reader([r]))[3] for r in rows]
    path = tmp_path / "mine.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("id", "text"), *((i, t) for i, t in enumerate(texts)), (300, texts[7])])
    proc = run("dedupe", model_path, "--data", path, "--out", tmp_path / "run", "--threshold", 0.9)
    assert "ids are row numbers from 1; --id-column id gives the file's own 'id' values" in proc.stdout
    cli = [json.loads(line) for line in (tmp_path / "run" / "clusters.jsonl").read_text().splitlines()]
    found = siamese.dedupe(path, model=str(model_path), threshold=0.9)
    ids = lambda c: [c.kept.id] + [d.record.id for d in c.duplicates]  # noqa: E731
    assert [ids(c) for c in found.clusters] == [[c["id"]] + [d["id"] for d in c["duplicates"]] for c in cli]
    copy = next(c for c in found.clusters if c.kept.row == 7)
    assert copy.kept.id == "8" and copy.kept.columns == {"id": "7"} and "301" in ids(copy)
    own = siamese.dedupe(path, model=str(model_path), threshold=0.9, id_column="id")
    assert next(c for c in own.clusters if c.kept.row == 7).kept.id == "7"
    with pytest.raises(TypeError, match="pass the file's path"):
        siamese.dedupe(texts, model=str(model_path), id_column="id")


def test_cli_rethreshold_explain_and_errors(model_path, data_dir, tmp_path):
    src = data_dir / "insuranceqa/questions.csv"
    out = tmp_path / "run"
    first = run_json(
        "dedupe",
        model_path,
        "--data",
        src,
        "--column",
        "question",
        "--id-column",
        "qid",
        "--out",
        out,
        "--threshold",
        0.95,
        "--floor",
        0.9,
        "-q",
    )
    again = run_json("dedupe", out, "--rethreshold", 0.97, "--explain", "--explain-count", 3)
    assert again["threshold"] == 0.97 and again["clusters"] != first["clusters"] and len(again["least_similar"]) == 3
    assert json.loads((out / "result.json").read_text())["threshold"] == 0.97
    assert json.loads((out / "clusters.jsonl").read_text().splitlines()[0])["columns"]["domain"]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_user_error(run("dedupe", out, "--rethreshold", 0.8, check_ok=False), str(out), "floor 0.9")
    assert_user_error(run("dedupe", out, "--rethreshold", 0.96, "--clusters", "cliques", check_ok=False), "'cliques'")
    # 1.5 used to be written, and every later command then refused the folder as damaged
    proc = run("dedupe", out, "--rethreshold", 1.5, check_ok=False)
    assert proc.returncode == 2 and "must be a number in [-1, 1]" in " ".join(proc.stderr.split())
    with pytest.raises(ConfigError, match="got 1.5"):
        DedupeRun.load(out).rethreshold(1.5)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing rewritten
    assert_user_error(run("dedupe", model_path, "--rethreshold", 0.9, check_ok=False), "not a siamese dedupe run")
    proc = run(
        "dedupe",
        model_path,
        "--data",
        src,
        "--column",
        "question",
        "--id-column",
        "nope",
        "--out",
        tmp_path / "x",
        check_ok=False,
    )
    assert_user_error(proc, str(src), "'nope'")
    dup_ids = tmp_path / "dup.csv"
    dup_ids.write_text("id,text\n1,a question\n1,another question\n")
    assert_user_error(
        run(
            "dedupe",
            model_path,
            "--data",
            dup_ids,
            "--column",
            "text",
            "--id-column",
            "id",
            "--out",
            tmp_path / "x",
            check_ok=False,
        ),
        str(dup_ids),
        "row 2",
        "'1'",
    )
    assert_user_error(run("dedupe", model_path, "--data", src, check_ok=False), "--out")
    assert not (tmp_path / "x").exists()


def test_index_add_skips_texts_already_indexed(trained, data_dir, monkeypatch):
    corpus = read_texts(data_dir / "insuranceqa/questions.csv", "question")
    index = DuplicateIndex(trained.model)
    assert index.add(corpus[:100]) == 100
    encoded = []
    original = trained.model.encode
    monkeypatch.setattr(trained.model, "encode", lambda t, **kw: encoded.append(len(t)) or original(t, **kw))
    batch = corpus[50:150] + [" " + corpus[10].replace(" ", "   ") + " ", corpus[120]]
    assert index.add(batch) == 50  # 50 indexed, a whitespace variant of an indexed one, a repeat in the batch
    assert encoded == [50] and len(index) == index.index.ntotal == 150 and index.texts[100:] == corpus[100:150]
    assert index.ids[-1] == "149"
    assert index.add(corpus[:3], allow_duplicates=True) == 3 and len(index) == 153
