"""Each command that writes a folder has a Python twin that does all it does: the command only
parses, calls the twin and prints. Here each command and its twin write a folder from the same
inputs, and the folders hold the same files, the same weights and the same fitted state."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import invoke
from safetensors.torch import load_file

from siamese.config.configs import ModelConfig, TrainConfig
from siamese.config.run import TrainRun

# what differs between two runs of the same work: clocks, speeds, the folder's own name
VOLATILE = {"seconds", "pairs_per_second", "texts_per_second", "warmup_seconds", "created", "out", "time"}


def _stable(value):
    """A JSON value without the fields that name the time, the speed or the folder."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE and "second" not in k}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _same_folders(a: Path, b: Path, inputs: tuple[Path, Path] | None = None) -> None:
    """The same files; JSON equal but for clocks and names (``inputs``: the two runs' input
    folders, whose paths the JSON may record); weights and arrays equal."""
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        x, y = a / rel, b / rel
        if rel.suffix == ".json":
            left = x.read_text() if inputs is None else x.read_text().replace(str(inputs[0]), str(inputs[1]))
            assert _stable(json.loads(left)) == _stable(json.loads(y.read_text())), rel
        elif rel.suffix == ".safetensors":
            left, right = load_file(x), load_file(y)
            assert left.keys() == right.keys()
            assert all(torch.equal(left[k], right[k]) for k in left), rel
        elif rel.suffix in (".npy", ".npz"):
            left, right = np.load(x), np.load(y)
            if rel.suffix == ".npz":
                assert left.files == right.files and all(np.array_equal(left[k], right[k]) for k in left.files), rel
            else:
                assert np.array_equal(left, right), rel
        elif rel.suffix in (".jsonl", ".txt", ".csv"):
            assert x.read_text() == y.read_text(), rel


def _command(*args) -> dict:
    ran = invoke(*map(str, args), "--json")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


@pytest.fixture(scope="module")
def quora(data_dir) -> Path:
    return data_dir / "quora" / "quora_question_pairs_sample300.csv"


@pytest.fixture(scope="module")
def trained_twice(quora, tmp_path_factory):
    """``siamese train`` and train_run on the same pairs, with a test split and a checkpoint."""
    from siamese.training.run import train_run

    tmp = tmp_path_factory.mktemp("twins")
    cli = _command(
        "train", "--data", quora, "--out", tmp / "cli", "--epochs", 2, "--test-fraction", 0.2,
        "--checkpoint", tmp / "cli-ck", "--dim", 32, "--quiet",
    )  # fmt: skip
    run = TrainRun(data=[quora], out=tmp / "api", test_fraction=0.2, checkpoint=tmp / "api-ck")
    api = train_run(run, ModelConfig(dim=32), TrainConfig(epochs=2), progress=False)
    return tmp, cli, api


def test_train_and_its_twin_write_the_same_model(trained_twice):
    tmp, cli, api = trained_twice
    _same_folders(tmp / "cli", tmp / "api")
    assert _stable(cli) == _stable(api.result) and "test" in cli  # the held-out split evaluated by both
    assert api.value.threshold == json.loads((tmp / "cli" / "config.json").read_text())["threshold"]


def test_a_resume_of_the_twin_needs_only_the_checkpoint(trained_twice):
    """The checkpoint keeps the run's options: resuming a finished run ends as it ended."""
    from siamese.training.run import train_run

    tmp, _, api = trained_twice
    again = train_run(TrainRun(resume=tmp / "api-ck", overwrite=True), progress=False)
    assert again.result["epochs"] == api.result["epochs"] and again.result["out"] == str(tmp / "api")
    resumed = _command("train", "--resume", tmp / "cli-ck", "--overwrite", "--quiet")
    assert resumed["epochs"] == 2 and resumed["out"] == str(tmp / "cli")


def test_answer_triplets_are_prepared_below_the_command_line(data_dir, tmp_path):
    """--answers: the twin builds the triplets, the split and the MAP/MRR report as the command does."""
    from siamese.training.run import train_run

    data = data_dir / "trecqa" / "dev.csv"
    cli = _command("train", "--answers", "--data", data, "--out", tmp_path / "cli", "--epochs", 1, "--dim", 16, "-q")
    run = TrainRun(data=[data], out=tmp_path / "api", answers=True)
    api = train_run(run, ModelConfig(dim=16, loss="hinge"), TrainConfig(epochs=1), progress=False)
    _same_folders(tmp_path / "cli", tmp_path / "api")
    assert _stable(cli) == _stable(api.result) and "validation_ranking" in cli


def test_dedupe_and_its_twin_write_the_same_run(trained, quora, tmp_path):
    from siamese.search.files import dedupe_files, rethreshold_files

    cli = _command("dedupe", trained.path, "--data", quora, "--column", "question1", "--out", tmp_path / "cli",
                   "--threshold", 0.8, "--explain", "--explain-count", 3, "-q")  # fmt: skip
    api = dedupe_files(
        trained.path, quora, tmp_path / "api", column="question1", threshold=0.8, explain=3, progress=False
    )
    _same_folders(tmp_path / "cli", tmp_path / "api")
    assert _stable(cli) == _stable(api.result) and 0 < len(cli["least_similar"]) <= 3
    cli = _command("dedupe", tmp_path / "cli", "--rethreshold", 0.85)
    api = rethreshold_files(tmp_path / "api", 0.85)
    _same_folders(tmp_path / "cli", tmp_path / "api")
    assert _stable(cli) == _stable(api.result) and api.result["threshold"] == 0.85


@pytest.mark.slow
def test_distill_and_its_twin_write_the_same_student(quora, tmp_path):
    from siamese.config.static import DistillRun, StaticConfig
    from siamese.distill.pipeline import distill_run

    texts = tmp_path / "texts.txt"  # the sample's first 400 fields, one a line: the teacher encodes them twice
    lines = quora.read_text(encoding="utf-8").replace(",", "\n").splitlines()[:400]
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ["--data", texts, "--val-data", quora, "--dim", 32, "--epochs", 1, "--vocabulary", "words"]
    cli = _command("distill", "--out", tmp_path / "cli", *common)
    run = DistillRun(out=tmp_path / "api", data=[texts], val_data=[quora])
    api = distill_run(run, StaticConfig(dim=32, epochs=1, vocabulary="words"), progress=False)
    _same_folders(tmp_path / "cli", tmp_path / "api")
    assert _stable(cli) == _stable(api.result)


@pytest.mark.slow
def test_pretrained_and_export_and_their_twins_write_the_same_folders(quora, tmp_path):
    from siamese.models.export import export_folder
    from siamese.models.sentence_encoder import pretrained_run

    cli = _command("pretrained", "minilm", "--out", tmp_path / "cli", "--val-data", quora, "--max-length", 64)
    api = pretrained_run("minilm", tmp_path / "api", val_data=[quora], max_length=64)
    _same_folders(tmp_path / "cli", tmp_path / "api")
    assert _stable(cli) == _stable(api.result) and cli["val_pairs"] == 300
    cli = _command("export", tmp_path / "cli", "--out", tmp_path / "cli-onnx")
    api = export_folder(tmp_path / "api", tmp_path / "api-onnx")
    _same_folders(tmp_path / "cli-onnx", tmp_path / "api-onnx", inputs=(tmp_path / "cli", tmp_path / "api"))
    assert (tmp_path / "cli-onnx" / "model.onnx").read_bytes() == (tmp_path / "api-onnx" / "model.onnx").read_bytes()
    assert _stable({k: v for k, v in cli.items() if k != "model_dir"}) == _stable(
        {k: v for k, v in api.result.items() if k != "model_dir"}
    )
