"""A static (bag-of-words) model read without torch for dedupe: the same vectors and fingerprint
as the full model, the same clusters, no torch in the process; anything else falls back."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from siamese import ModelConfig, SiameseModel, datasets, train
from siamese.models.static_reader import open_static
from siamese.search import dedupe
from siamese.training import TrainConfig


@pytest.fixture(scope="module")
def bow(data_dir, tmp_path_factory):
    pairs = datasets.load("msrp-train", data_dir).positives().subset(range(1500))
    model = train(
        pairs, model_config=ModelConfig(encoder="bow", dim=32), config=TrainConfig(epochs=1, seed=0), progress=False
    )
    return model.save(tmp_path_factory.mktemp("bow") / "model")


@pytest.fixture(scope="module")
def texts(data_dir):
    pairs = datasets.load("msrp-test", data_dir)
    return list(dict.fromkeys(pairs.text1 + pairs.text2))


def test_the_vectors_fingerprint_and_clusters_are_the_full_models(bow, texts, tmp_path):
    light, full = open_static(bow), SiameseModel.load(bow, device="cpu")
    assert light is not None and light.dim == full.dim == 32
    assert np.abs(light.encode(texts) - full.encode(texts)).max() < 1e-5
    assert light.encode(texts[0]).shape == (32,) and light.fingerprint() == full.fingerprint()
    assert light.threshold == full.threshold
    a = dedupe(light, texts, tmp_path / "light", threshold=0.8)
    b = dedupe(full, texts, tmp_path / "full", threshold=0.8)
    assert a.meta["model_fingerprint"] == b.meta["model_fingerprint"]
    ours, theirs = a.clusters(), b.clusters()
    assert len(ours) == len(theirs) > 10
    for x, y in zip(ours, theirs):  # the same members; similarities to float rounding
        assert x.kept.row == y.kept.row and {d.record.row for d in x.duplicates} == {d.record.row for d in y.duplicates}
        sims = dict((d.record.row, d.similarity) for d in y.duplicates)
        assert all(abs(d.similarity - sims[d.record.row]) < 1e-5 for d in x.duplicates)


def test_a_dedupe_with_it_never_imports_torch(bow, texts, tmp_path):
    data = tmp_path / "texts.txt"
    data.write_text("\n".join(texts) + "\n", encoding="utf-8")
    code = (
        "import sys\n"
        "from siamese.cli.root import app\n"
        f'try: app(["dedupe", {str(bow)!r}, "--data", {str(data)!r}, "--out", {str(tmp_path / "run")!r}, "-q"])\n'
        "except SystemExit as e: assert e.code == 0, e.code\n"
        "print('torch' in sys.modules)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "False"
    assert (tmp_path / "run" / "clusters.jsonl").is_file()


def test_other_models_and_damaged_folders_fall_back_to_the_full_load(bow, model_path, tmp_path):
    assert open_static(model_path) is None  # an LSTM
    pairs = SiameseModel.build(["a b", "b c"], ModelConfig(encoder="bow", dim=8, encoder_options={"ngrams": 2}))
    assert open_static(pairs.save(tmp_path / "pairs")) is None  # word pairs are pooled per padded row
    assert open_static(bow, device="cuda") is None
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in bow.iterdir():
        (damaged / f.name).write_bytes(f.read_bytes())
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    assert open_static(damaged) is None
    with pytest.raises(Exception, match="model.safetensors"):
        SiameseModel.load(damaged)
