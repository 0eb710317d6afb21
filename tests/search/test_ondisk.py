"""The on-disk IVF index (--kind ondisk): built in shards from real encodings, its inverted lists
memory-mapped from a file beside it, searched like the in-memory indexes."""

from __future__ import annotations

import csv
import json
import shutil

import faiss
import numpy as np
import pytest
from typer.testing import CliRunner

from siamese import SiameseModel
from siamese.cli import app
from siamese.search import DuplicateIndex
from siamese.search.ondisk import build_ondisk, read_ondisk


@pytest.fixture(scope="module")
def questions(data_dir) -> list[str]:
    with open(data_dir / "insuranceqa" / "questions.csv", newline="", encoding="utf-8") as f:
        return [t for t in (row["question"].strip() for row in csv.DictReader(f)) if t][:4000]


def test_sharded_ondisk_index_finds_what_exact_search_finds(model_path, questions, tmp_path):
    model = SiameseModel.load(model_path, device="cpu")
    index = DuplicateIndex(model, kind="ondisk", nprobe=32)
    index.shard_size = 900  # 5 shards merged into one lists file
    index.add(questions)
    index.save(tmp_path / "built")
    shutil.move(tmp_path / "built", tmp_path / "moved")  # the lists file is found beside the index, wherever it is
    assert sorted(p.name for p in (tmp_path / "moved").iterdir()) == [
        "index.faiss",
        "index.json",
        "lists.ivfdata",
        "texts.jsonl",
    ]
    loaded = DuplicateIndex.load(tmp_path / "moved")
    lists = faiss.extract_index_ivf(loaded.index).invlists
    assert isinstance(faiss.downcast_InvertedLists(lists), faiss.OnDiskInvertedLists)
    assert len(loaded) == loaded.index.ntotal == len({" ".join(q.split()) for q in questions})  # repeats once

    exact = DuplicateIndex(model, kind="flat")
    exact.add(questions)
    queries = questions[::97]
    found, truth = loaded.search(queries, 5), exact.search(queries, 5)
    # each question finds itself (or a text with the same vector) first
    assert all(hits[0].similarity > 0.999 for hits in found)
    # the neighbours are as close as the exact ones (ties between equal vectors may come in another order)
    as_close = np.mean(
        [a.similarity >= b.similarity - 1e-4 for hits, best in zip(found, truth) for a, b in zip(hits, best)]
    )
    assert as_close > 0.9


def test_build_from_memory_mapped_vectors(model_path, questions, tmp_path):
    vectors = SiameseModel.load(model_path).encode(questions[:2000])
    np.save(tmp_path / "v.npy", vectors)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")  # what `siamese encode` writes, never read whole
    (tmp_path / "idx").mkdir()
    build_ondisk(mapped, tmp_path / "idx", shard_size=512)
    index = read_ondisk(tmp_path / "idx" / "index.faiss", nprobe=64)
    scores, rows = index.search(vectors[[0, 1999]], 1)
    assert rows[:, 0].tolist() == [0, 1999] and np.all(scores[:, 0] > 0.999)
    assert not (tmp_path / "idx" / "shards").exists()


def test_cli_builds_an_ondisk_index_and_refuses_to_extend_it(model_path, questions, tmp_path):
    corpus = tmp_path / "q.txt"
    corpus.write_text("\n".join(questions[:1500]) + "\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "index",
            "build",
            str(model_path),
            "--data",
            str(corpus),
            "--out",
            str(tmp_path / "idx"),
            "--kind",
            "ondisk",
            "--shard-size",
            "400",
            "--json",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    built = json.loads(result.stdout)
    assert built["size"] + built["skipped"] == 1500 and built["kind"] == "ondisk"
    result = runner.invoke(app, ["search", str(tmp_path / "idx"), questions[7], "-k", "1", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["hits"][0]["text"] == questions[7]
    (tmp_path / "new.txt").write_text("\n".join(questions[1500:1600]) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["index", "add", str(tmp_path / "idx"), "--data", str(tmp_path / "new.txt")])
    assert result.exit_code == 2 and "built whole" in result.output
