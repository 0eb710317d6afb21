"""Duplicate search: a real FAISS index over real questions, checked against brute force."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, run, run_json

from siamese import datasets, read_texts
from siamese.search import DuplicateIndex, SearchIndexError, communities, components, dedupe, duplicate_pairs


@pytest.fixture(scope="module")
def corpus(data_dir) -> list[str]:
    return read_texts(data_dir / "insuranceqa/questions.csv", "question")


@pytest.fixture(scope="module")
def flat(trained, corpus) -> DuplicateIndex:
    index = DuplicateIndex(trained.model)
    index.add(corpus)
    return index


def test_flat_search_is_exact(trained, corpus, flat):
    queries = corpus[:50] + ["how do i cancel my car insurance", "is life insurance taxable"]
    hits = flat.search(queries, k=5)
    vectors, q = trained.model.encode(corpus), trained.model.encode(queries)
    expected = np.argsort(-(q @ vectors.T), axis=1, kind="stable")[:, :5]
    for row, (h, e) in enumerate(zip(hits, expected)):
        assert [x.similarity for x in h] == pytest.approx(list((q @ vectors.T)[row, e]), abs=1e-5)
        assert h[0].similarity >= h[-1].similarity
    # an indexed question finds itself first (or tied with a text that normalises the same)
    for h, t in zip(hits, queries[:50]):
        assert h[0].similarity == pytest.approx(1.0, abs=1e-4)
        assert t in [x.text for x in h if x.similarity > 1 - 1e-4]
    assert all(x.duplicate == (x.similarity > trained.model.threshold) for h in hits for x in h)


def test_known_duplicates_are_retrieved(data_dir, flat):
    pairs = datasets.load("insuranceqa-pairs", data_dir)
    hits = flat.search(pairs.text1, k=10)
    # the partner question (sharing an answer) is among the top 10, excluding the query itself
    found = [any(x.text == b for x in h) for h, b in zip(hits, pairs.text2)]
    control = [any(x.text == b for x in h) for h, b in zip(hits, np.roll(pairs.text2, 7))]
    assert np.mean(found) > 0.3 > np.mean(control)  # far above chance (10 of 16,889)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_recall_against_exact(trained, corpus, flat, kind):
    index = DuplicateIndex(trained.model, kind=kind)
    index.add(corpus)
    queries = corpus[::97]
    exact = [{x.id for x in h} for h in flat.search(queries, k=10)]
    approx = [{x.id for x in h} for h in index.search(queries, k=10)]
    recall = np.mean([len(a & e) / len(e) for a, e in zip(approx, exact)])
    assert recall >= 0.9


def test_ivf_lists_are_learnt_once_and_saved(trained, corpus, tmp_path):
    index = DuplicateIndex(trained.model, kind="ivf", nprobe=4)
    index.add(corpus[:4000])
    assert index.index.nlist == 102 and index.index.is_trained  # min(4·√4000, 4000 // 39)
    index.add(corpus[4000:4100])  # appended to the trained lists
    assert index.index.nlist == 102 and len(index) == index.index.ntotal == 4100
    loaded = DuplicateIndex.load(index.save(tmp_path / "ivf"))
    assert loaded.kind == "ivf" and loaded.index.nprobe == 4
    queries = corpus[4050:4060]
    assert [[h.id for h in r] for r in loaded.search(queries, k=3)] == [
        [h.id for h in r] for r in index.search(queries, k=3)
    ]


def test_save_load_add_and_model_check(trained, corpus, tmp_path, monkeypatch):
    index = DuplicateIndex(trained.model)
    index.add(corpus[:1000], ids=[f"q{i}" for i in range(1000)])
    path = index.save(tmp_path / "idx")
    loaded = DuplicateIndex.load(path)  # the model folder recorded at build time
    assert len(loaded) == 1000 and loaded.ids[:2] == ["q0", "q1"]
    assert [h.id for h in loaded.search(corpus[5], k=3)[0]] == [h.id for h in index.search(corpus[5], k=3)[0]]

    encoded = []
    original = loaded.model.encode
    monkeypatch.setattr(loaded.model, "encode", lambda texts, **kw: encoded.append(len(texts)) or original(texts, **kw))
    loaded.add(corpus[1000:1010])
    assert encoded == [10]  # only the new texts are encoded
    loaded.save(path)
    assert len(DuplicateIndex.load(path)) == 1010

    other = trained.model.__class__.load(trained.path)
    other.encoder.embedding.weight.data[2] += 1.0  # any change of weights makes another model
    with pytest.raises(SearchIndexError, match="different model"):
        DuplicateIndex.load(path, other)
    (path / "index.json").write_text("{broken")
    with pytest.raises(SearchIndexError, match="invalid JSON"):
        DuplicateIndex.load(path, trained.model)


def test_duplicate_pairs_and_clusters_match_brute_force(trained, corpus):
    texts = corpus[:800]
    vectors = trained.model.encode(texts)
    t = 0.9
    pairs = duplicate_pairs(vectors, t, k=len(texts))
    found = {(i, j) for i, j, _ in pairs}
    sims = vectors @ vectors.T
    expected = {(i, j) for i, j in zip(*np.nonzero(np.triu(sims > t, k=1)))}
    assert found == expected and found
    assert pairs.similarity == pytest.approx(sims[pairs.first, pairs.second], abs=1e-5)
    groups = components(len(texts), pairs)
    # brute-force components by repeated propagation
    label = np.arange(len(texts))
    for _ in range(len(texts)):
        changed = False
        for i, j in found:
            low = min(label[i], label[j])
            if label[i] != low or label[j] != low:
                label[i] = label[j] = low
                changed = True
        if not changed:
            break
    comps = {}
    for x, lab in enumerate(label):
        comps.setdefault(lab, []).append(x)
    assert sorted(map(sorted, groups)) == sorted(c for c in comps.values() if len(c) > 1)


def test_communities_do_not_chain():
    # five unit vectors 30° apart: neighbours are duplicates (cos 30° > 0.8), two apart are not (cos 60°)
    angles = np.radians([0, 30, 60, 90, 120])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    pairs = duplicate_pairs(vectors, 0.8, k=5)
    assert sorted(zip(pairs.first.tolist(), pairs.second.tolist())) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert components(5, pairs) == [[0, 1, 2, 3, 4]]  # the chain joins 0° and 120°
    assert communities(5, pairs) == [[1, 0, 2], [3, 4]]  # centre first; every member a duplicate of it
    assert communities(5, pairs, min_size=3) == [[1, 0, 2]]


def test_ivf_pairs_agree_with_exact(trained, corpus):
    vectors = trained.model.encode(corpus)
    exact = duplicate_pairs(vectors, 0.9, k=10, kind="flat")
    approx = duplicate_pairs(vectors, 0.9, k=10, kind="ivf")
    shared = set(zip(exact.first.tolist(), exact.second.tolist())) & set(
        zip(approx.first.tolist(), approx.second.tolist())
    )
    assert len(shared) >= 0.9 * len(exact) > 0 and len(approx) <= len(exact) * 1.05


def test_communities_on_real_questions(trained, corpus):
    vectors = trained.model.encode(corpus[:3000])
    t = 0.9
    pairs = duplicate_pairs(vectors, t, k=50)
    tight, loose = communities(3000, pairs), components(3000, pairs)
    assert tight and len(tight) >= len(loose)
    members = [x for g in tight for x in g]
    assert len(members) == len(set(members))  # disjoint
    component_of = {x: n for n, g in enumerate(loose) for x in g}
    for g in tight:
        assert (vectors[g[1:]] @ vectors[g[0]] > t).all()  # each member is a duplicate of its centre
        assert len({component_of[x] for x in g}) == 1  # and lies in the centre's component
    degree = np.bincount(np.concatenate([pairs.first, pairs.second]), minlength=3000)
    assert degree[tight[0][0]] == degree.max() or len(tight[0]) >= degree.max() + 1


def test_dedupe_writes_clusters(trained, corpus, tmp_path):
    out = tmp_path / "run"
    summary = dedupe(trained.model, corpus[:3000], out, threshold=0.95).summary()
    lines = [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
    assert len(lines) == summary["clusters"] > 0
    assert sum(c["size"] for c in lines) == summary["clustered_texts"]
    assert [c["size"] for c in lines] == sorted((c["size"] for c in lines), reverse=True)
    assert all(c["size"] == 1 + len(c["duplicates"]) for c in lines)
    rows = [m["row"] for c in lines for m in [c, *c["duplicates"]]]
    assert len(rows) == len(set(rows))  # a text is in one cluster at most
    assert all(m["text"] == corpus[m["row"]] for c in lines for m in [c, *c["duplicates"]])


def test_cli_index_search_add_dedupe(model_path, data_dir, tmp_path):
    src = data_dir / "insuranceqa/questions.csv"
    idx = tmp_path / "idx"
    built = run_json("index", "build", model_path, "--data", src, "--column", "question", "--out", idx, "--quiet")
    assert built["size"] == 16889
    res = run_json("search", idx, "What Is A Defined Contribution Retirement Plan?", "-k", 3)
    assert len(res["hits"]) == 3 and res["hits"][0]["text"] == "What Is A Defined Contribution Retirement Plan?"
    assert res["hits"][0]["duplicate"] is True
    new = tmp_path / "new.txt"
    new.write_text("Can my landlord raise the rent for renters insurance?\n\nIs a vasectomy covered by health plans?\n")
    added = run_json("index", "add", idx, "--data", new, "--quiet")
    assert added == {"out": str(idx), "added": 2, "skipped": 0, "size": 16891}
    again = run_json("index", "add", idx, "--data", new, "--quiet")  # already indexed: skipped, nothing encoded
    assert again == {"out": str(idx), "added": 0, "skipped": 2, "size": 16891}
    res = run_json("search", idx, "Is a vasectomy covered by health plans?", "-k", 1)
    assert res["hits"][0]["id"] == "16890"
    out = tmp_path / "run"
    summary = run_json(
        "dedupe", model_path, "--data", src, "--column", "question", "--out", out, "--threshold", 0.97, "--quiet"
    )
    assert summary["clusters"] == len((out / "clusters.jsonl").read_text().splitlines()) > 0
    tight = run_json(
        "dedupe",
        model_path,
        "--data",
        src,
        "--column",
        "question",
        "--out",
        out,
        "--threshold",
        0.97,
        "--clusters",
        "communities",
        "--min-size",
        3,
        "--quiet",
    )
    sizes = [json.loads(line)["size"] for line in (out / "clusters.jsonl").read_text().splitlines()]
    assert tight["clustering"] == "communities" and len(sizes) == tight["clusters"] > 0 and min(sizes) >= 3
    proc = run(
        "dedupe",
        model_path,
        "--data",
        src,
        "--column",
        "question",
        "--out",
        tmp_path / "x",
        "--clusters",
        "cliques",
        check_ok=False,
    )
    assert_user_error(proc, "clustering", "'cliques'")
    assert not (tmp_path / "x").exists()


def test_cli_search_errors(model_path, tmp_path):
    assert_user_error(run("search", tmp_path, "q", check_ok=False), str(tmp_path), "index.json")
    bad = tmp_path / "texts.csv"
    bad.write_text("title\nfoo\n")
    proc = run(
        "index", "build", model_path, "--data", bad, "--column", "question", "--out", tmp_path / "i", check_ok=False
    )
    assert_user_error(proc, str(bad), "'question'")
    assert not (tmp_path / "i").exists()


def test_retrieval_metrics(trained, data_dir):
    from siamese.search import retrieval_metrics

    pairs = datasets.load("insuranceqa-pairs", data_dir)
    corpus = sorted(set(pairs.text1 + pairs.text2))
    index = DuplicateIndex(trained.model)
    index.add(corpus)
    report = retrieval_metrics(index, pairs.text1, pairs.text2)
    assert report["queries"] == 526
    assert 0 < report["recall@1"] <= report["recall@5"] <= report["recall@10"] <= 1
    assert report["recall@1"] <= report["mrr@10"] <= report["recall@10"]
    # brute force for recall@1: the nearest other question is the partner
    vectors = trained.model.encode(corpus)
    pos = {t: i for i, t in enumerate(corpus)}
    sims = trained.model.encode(pairs.text1) @ vectors.T
    for row, q in enumerate(pairs.text1):
        sims[row, pos[q]] = -np.inf
    top1 = [corpus[j] for j in sims.argmax(1)]
    assert report["recall@1"] == pytest.approx(np.mean([t == b for t, b in zip(top1, pairs.text2)]), abs=0.01)
    # a scrambled target list scores near zero
    assert retrieval_metrics(index, pairs.text1, list(np.roll(pairs.text2, 11)))["recall@10"] < 0.05
