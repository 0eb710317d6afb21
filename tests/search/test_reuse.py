"""Reuse of work: an index built from a dedupe run's vectors, a dedupe from an index's, and a run
or index written over an earlier one of the same model, encode only the texts not already there,
and give the vectors, pairs and hits a fresh encoding gives; another model's (or another
precision's) vectors are refused in one line."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pytest
from conftest import invoke

from siamese import ModelConfig, SiameseModel
from siamese.errors import OutputError
from siamese.search import DedupeRun, DuplicateIndex


@pytest.fixture
def encoded(monkeypatch):
    """How many texts the model encodes, call by call."""
    counts: list[int] = []
    real = SiameseModel._encode

    def counting(self, texts, *args, **kwargs):
        counts.append(len(texts))
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(SiameseModel, "_encode", counting)
    return counts


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory):
    """The first 3,000 InsuranceQA questions (ids first, as the real file), and 500 more beside them."""
    lines = (data_dir / "insuranceqa" / "questions.csv").read_text(encoding="utf-8").splitlines()
    folder = tmp_path_factory.mktemp("reuse")
    first, more = folder / "first.csv", folder / "more.csv"
    first.write_text("\n".join(lines[:3001]) + "\n", encoding="utf-8")
    more.write_text("\n".join(lines[:1] + lines[2001:3501]) + "\n", encoding="utf-8")  # 1,000 shared
    return first, more


def vectors_of(index_dir) -> dict[str, np.ndarray]:
    index = faiss.read_index(str(index_dir / "index.faiss"))
    texts = [json.loads(line)["text"] for line in (index_dir / "texts.jsonl").read_text().splitlines()]
    return dict(zip(texts, index.reconstruct_n(0, index.ntotal)))


def run_json(*args) -> dict:
    ran = invoke(*args, "--json", "--quiet")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def user_error(*args) -> str:
    ran = invoke(*args)
    assert ran.returncode == 2, (ran.returncode, ran.stdout, ran.stderr)
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), ran.stderr
    return lines[0]


def test_index_build_takes_a_dedupe_runs_vectors_and_dedupe_an_indexs(small_calibrated, corpus, tmp_path, encoded):
    model, (first, more) = small_calibrated.path, corpus
    run = run_json("dedupe", model, "--data", first, "--out", tmp_path / "run")
    assert sum(encoded) == run["distinct_texts"] == 3000

    encoded.clear()
    built = run_json("index", "build", model, "--data", first, "--out", tmp_path / "idx", "--reuse", tmp_path / "run")
    assert encoded in ([], [0]) and built["reused"] == 3000  # nothing encoded again
    fresh = run_json("index", "build", model, "--data", first, "--out", tmp_path / "fresh")
    assert "reused" not in fresh
    reused, encoded_again = vectors_of(tmp_path / "idx"), vectors_of(tmp_path / "fresh")
    assert reused.keys() == encoded_again.keys()
    np.testing.assert_allclose(np.stack(list(reused.values())), np.stack(list(encoded_again.values())), atol=1e-6)

    # a bigger corpus: only the texts the index lacks are encoded, and the pairs are a fresh run's
    encoded.clear()
    grown = run_json("dedupe", model, "--data", more, "--out", tmp_path / "grown", "--reuse", tmp_path / "idx")
    assert grown["reused"]["vectors"] == 1000 and sum(encoded) == 500
    plain = run_json("dedupe", model, "--data", more, "--out", tmp_path / "plain")
    a, b = DedupeRun.load(tmp_path / "grown"), DedupeRun.load(tmp_path / "plain")
    np.testing.assert_allclose(a.vectors, b.vectors, atol=1e-6)
    assert (grown["pairs"], grown["clusters"]) == (plain["pairs"], plain["clusters"])


def test_writing_over_an_earlier_output_of_the_same_model_reuses_its_vectors(
    small_calibrated, corpus, tmp_path, encoded
):
    model, (first, more) = small_calibrated.path, corpus
    run_json("index", "build", model, "--data", first, "--out", tmp_path / "idx", "--kind", "ivf")
    encoded.clear()
    again = run_json("index", "build", model, "--data", more, "--out", tmp_path / "idx", "--kind", "ivf")
    assert again["reused"] == 1000 and sum(encoded) == 500  # an IVF index gives its vectors back too
    index = DuplicateIndex.load(tmp_path / "idx")
    hits = index.search([index.texts[0], index.texts[-1]], 1)
    assert [h[0].text for h in hits] == [index.texts[0], index.texts[-1]]
    assert all(h[0].similarity > 0.999 for h in hits)

    run_json("dedupe", model, "--data", first, "--out", tmp_path / "run", "--threshold", "0.95")
    encoded.clear()
    looser = run_json("dedupe", model, "--data", first, "--out", tmp_path / "run", "--threshold", "0.8")
    assert looser["reused"]["vectors"] == 3000 and sum(encoded) == 0

    # written by another version of siamese (which may encode differently): encoded afresh unless asked
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    (tmp_path / "run" / "run.json").write_text(json.dumps({**meta, "siamese_version": "0.0.1"}))
    encoded.clear()
    again = run_json("dedupe", model, "--data", first, "--out", tmp_path / "run", "--threshold", "0.8")
    assert "reused" not in again and sum(encoded) == 3000


def test_another_models_or_another_precisions_vectors_are_refused(small_calibrated, corpus, tmp_path):
    model, (first, _) = small_calibrated.path, corpus
    other = SiameseModel.build(["a question", "another one"], ModelConfig(dim=32, seed=1)).save(tmp_path / "other")
    run_json("dedupe", other, "--data", first, "--out", tmp_path / "theirs")
    line = user_error(
        "index", "build", model, "--data", first, "--out", tmp_path / "idx", "--reuse", tmp_path / "theirs"
    )
    assert "its vectors come from another model" in line
    assert not (tmp_path / "idx").exists()
    # written over by another model: encoded afresh, nothing taken from it
    replaced = run_json("dedupe", model, "--data", first, "--out", tmp_path / "theirs")
    assert "reused" not in replaced

    meta = json.loads((tmp_path / "theirs" / "run.json").read_text())
    assert meta["precision"] == "fp32"  # an LSTM computes in fp32 on every CPU
    meta["precision"] = "bf16"
    (tmp_path / "theirs" / "run.json").write_text(json.dumps(meta))
    line = user_error(
        "index", "build", model, "--data", first, "--out", tmp_path / "idx", "--reuse", tmp_path / "theirs"
    )
    assert "computed in bf16, this run computes in fp32" in line and "SIAMESE_PRECISION=bf16" in line


def test_what_cannot_be_reused_is_one_line(small_calibrated, corpus, tmp_path):
    model, (first, more) = small_calibrated.path, corpus
    run_json("dedupe", model, "--data", more, "--against", first, "--out", tmp_path / "against")
    line = user_error(
        "index", "build", model, "--data", first, "--out", tmp_path / "i1", "--reuse", tmp_path / "against"
    )
    assert "keeps no vectors" in line
    run_json("index", "build", model, "--data", first, "--out", tmp_path / "ondisk", "--kind", "ondisk")
    line = user_error("dedupe", model, "--data", first, "--out", tmp_path / "r1", "--reuse", tmp_path / "ondisk")
    assert "on-disk index" in line
    assert "found neither" in user_error(
        "index", "build", model, "--data", first, "--out", tmp_path / "i2", "--reuse", tmp_path
    )
    run_json("dedupe", model, "--data", first, "--out", tmp_path / "run")
    assert "takes no --reuse" in user_error("dedupe", tmp_path / "run", "--rethreshold", "0.95", "--reuse", tmp_path)


def test_the_python_api_builds_and_extends_an_index_as_the_commands_do(small_calibrated, corpus, tmp_path, encoded):
    """index_files / add_files: what `siamese index build` and `index add` run, callable from Python with the same
    keywords (ids from a column, reuse of a run's vectors, only new texts encoded on an add)."""
    from siamese.search.files import add_files, dedupe_files, index_files

    model, (first, more) = small_calibrated.path, corpus
    dedupe_files(model, first, tmp_path / "run", progress=False)
    encoded.clear()
    built = index_files(model, first, tmp_path / "idx", id_column="qid", reuse=tmp_path / "run", progress=False)
    assert encoded in ([], [0]) and built.result["reused"] == 3000 and built.result["size"] == 3000
    cli = run_json("index", "build", model, "--data", first, "--id-column", "qid", "--out", tmp_path / "cli")
    assert cli["size"] == built.result["size"]
    assert vectors_of(tmp_path / "cli").keys() == vectors_of(tmp_path / "idx").keys()
    index = DuplicateIndex.load(tmp_path / "idx")
    assert index.ids[:3] == ["0", "1", "2"] and index.search(index.texts[5], 1)[0][0].id == index.ids[5]

    encoded.clear()
    added = add_files(tmp_path / "idx", more, progress=False)
    assert added.result["added"] == 500 and added.result["skipped"] == 1000 and sum(encoded) == 500
    assert len(DuplicateIndex.load(tmp_path / "idx")) == 3500
    with pytest.raises(OutputError):  # an input is never an output
        index_files(model, first, model, progress=False)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="notes.txt"):  # nor is a folder of the user's replaced
        index_files(model, first, tmp_path / "mine", progress=False)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"
