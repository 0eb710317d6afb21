"""--engine ray: encode, index build and dedupe on a real local Ray cluster (started once for this
module, 2 CPUs: one actor + one left free), compared with the one-process engine on real data."""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ray
from typer.testing import CliRunner

from siamese import SiameseModel
from siamese.cli import app
from siamese.search import DuplicateIndex
from siamese.search.ray_engine import RayEngine

runner = CliRunner()


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory) -> Path:
    """3,000 real InsuranceQA questions (many asked in several wordings) as a .txt file."""
    with open(data_dir / "insuranceqa" / "questions.csv", newline="", encoding="utf-8") as f:
        texts = [row["question"].strip() for row in csv.DictReader(f)][:3000]
    path = tmp_path_factory.mktemp("corpus") / "questions.txt"
    path.write_text("\n".join(t for t in texts if t) + "\n", encoding="utf-8")
    return path


def invoke(*args) -> dict:
    result = runner.invoke(app, [*map(str, args), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_encode_on_ray_writes_the_local_engines_vectors(cluster, model_path, corpus, tmp_path):
    invoke("encode", model_path, "--data", corpus, "--out", tmp_path / "local.npy")
    summary = invoke("encode", model_path, "--data", corpus, "--out", tmp_path / "ray.npy", "--engine", "ray")
    local, distributed = np.load(tmp_path / "local.npy"), np.load(tmp_path / "ray.npy")
    assert summary["n"] == len(local) == len(corpus.read_text().splitlines())
    np.testing.assert_allclose(distributed, local, atol=1e-5)  # same rows, in file order
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.npy", "ray.npy"]  # no temporary left


def test_dedupe_on_ray_gives_the_same_clusters(cluster, model_path, corpus, tmp_path):
    common = ["--data", corpus, "--threshold", "0.9", "--kind", "flat"]
    local = invoke("dedupe", model_path, *common, "--out", tmp_path / "local")
    distributed = invoke("dedupe", model_path, *common, "--out", tmp_path / "ray", "--engine", "ray")
    assert local["clusters"] > 10 and local["pairs"] == distributed["pairs"]
    with np.load(tmp_path / "local" / "pairs.npz") as a, np.load(tmp_path / "ray" / "pairs.npz") as b:
        # Locally the static student is read without torch, on Ray by the full model: the vectors agree
        # to ~2e-7, so which of several equally similar texts is a text's k-th neighbour may differ.
        here = dict(zip(zip(a["first"].tolist(), a["second"].tolist()), a["similarity"].tolist()))
        there = dict(zip(zip(b["first"].tolist(), b["second"].tolist()), b["similarity"].tolist()))
        shared = here.keys() & there.keys()
        assert len(shared) >= 0.99 * len(here)
        np.testing.assert_allclose([here[p] for p in shared], [there[p] for p in shared], atol=1e-5)
    assert (tmp_path / "ray" / "clusters.jsonl").read_text() == (tmp_path / "local" / "clusters.jsonl").read_text()
    # communities too (centres chosen by degree: the same pairs give the same centres)
    invoke("dedupe", model_path, *common, "--clusters", "communities", "--out", tmp_path / "c_local")
    invoke("dedupe", model_path, *common, "--clusters", "communities", "--out", tmp_path / "c_ray", "--engine", "ray")
    assert (tmp_path / "c_ray" / "clusters.jsonl").read_text() == (tmp_path / "c_local" / "clusters.jsonl").read_text()


def test_index_built_on_ray_finds_each_text(cluster, model_path, corpus, tmp_path):
    summary = invoke("index", "build", model_path, "--data", corpus, "--out", tmp_path / "index", "--engine", "ray")
    index = DuplicateIndex.load(tmp_path / "index")
    texts = corpus.read_text().splitlines()
    assert summary["size"] == len(index) and summary["size"] + summary["skipped"] == len(texts)  # repeats indexed once
    for row in (0, 1234, len(texts) - 1):
        assert index.search(texts[row], 1)[0][0].similarity > 0.999


def test_engine_encodes_in_blocks_with_the_model_of_the_folder(cluster, model_path, corpus):
    model = SiameseModel.load(model_path, device="cpu")
    texts = corpus.read_text().splitlines()[:500]
    engine = RayEngine(block_size=64, batch_size=16)  # many blocks and batches: rows must land in place
    assert engine.actors == 1  # 2 CPUs in the cluster: one left free for the readers
    np.testing.assert_allclose(engine.encode(model, texts), model.encode(texts), atol=1e-5)


def test_engine_options_are_checked(model_path, corpus, tmp_path):
    result = runner.invoke(
        app, ["encode", str(model_path), "--data", str(corpus), "--out", str(tmp_path / "v.npy"), "--engine", "spark"]
    )
    assert result.exit_code == 2 and "unknown engine 'spark'" in result.output
    result = runner.invoke(
        app,
        [
            "dedupe",
            str(model_path),
            "--data",
            str(corpus),
            "--out",
            str(tmp_path / "d"),
            "--address",
            "ray://127.0.0.1:10001",
        ],
    )
    assert result.exit_code == 2 and "--engine ray" in result.output
    assert not list(tmp_path.iterdir())


def test_the_local_engine_does_not_import_ray(model_path, corpus, tmp_path):
    code = (
        "import sys; from typer.testing import CliRunner; from siamese.cli import app; "
        f"r = CliRunner().invoke(app, ['encode', {str(model_path)!r}, '--data', {str(corpus)!r}, "
        f"'--out', {str(tmp_path / 'v.npy')!r}, '--quiet']); "
        "assert r.exit_code == 0, r.output; print('ray' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
