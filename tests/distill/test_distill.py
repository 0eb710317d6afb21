"""Distillation: a student learns to reproduce a teacher's cosines (loss "distill"); the teacher
encodes each distinct text once; clear errors; the teacher is recorded in the model."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from conftest import invoke
from scipy.stats import spearmanr

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.data.pairs import Pairs
from siamese.errors import ConfigError, ModelError
from siamese.models.losses import DistillLoss, check_head_and_loss
from siamese.models.st_layout import read_layout
from siamese.training.teacher import TeacherVectors, load_teacher

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def sts(data_dir):
    """600 training pairs (STS-B + SICK train, any label), 100 validation and 300 held-out STS-B dev pairs."""
    pairs = datasets.load_many(["sts-train", "sick-train"], data_dir)
    dev = datasets.load("sts-dev", data_dir)
    return (
        pairs.subset(np.random.default_rng(0).choice(len(pairs), 600, replace=False)),
        dev.subset(range(100)),
        dev.subset(range(100, 400)),
    )


@pytest.fixture(scope="module")
def minilm():
    """The default all-MiniLM-L6-v2 (it ships with the package) as the teacher."""
    return SiameseModel.build([], ModelConfig(encoder="transformer", max_length=32))


@pytest.fixture(scope="module")
def distilled(sts, minilm):
    train_pairs, val, _ = sts
    config = ModelConfig(encoder="lstm", loss="distill", dim=64)
    student = train(
        train_pairs,
        val,
        model_config=config,
        progress=False,
        config=TrainConfig(epochs=5, batch_size=32, workers=1, teacher=minilm),
    )
    return student, config


def agreement(model, teacher_scores, pairs) -> float:
    return spearmanr(model.similarity_pairwise(pairs.text1, pairs.text2), teacher_scores).statistic


def test_distilling_minilm_into_an_lstm_raises_agreement_on_held_out_pairs(sts, minilm, distilled):
    train_pairs, _, held_out = sts
    student, config = distilled
    teacher_scores = minilm.similarity_pairwise(held_out.text1, held_out.text2)
    untrained = SiameseModel.build(train_pairs.text1 + train_pairs.text2, config)  # where training started
    before, after = agreement(untrained, teacher_scores, held_out), agreement(student, teacher_scores, held_out)
    assert after > before + 0.1 and after > 0.55, (before, after)  # measured: 0.48 -> 0.67
    history = student.info["training"]["history"]
    assert history[-1]["val_loss"] < history[0]["val_loss"]  # agreement on validation texts, the best epoch's kept


def test_the_teacher_is_recorded_and_the_student_saves_alone(distilled, minilm, tmp_path):
    student, _ = distilled
    info = student.info["training"]
    assert info["loss"] == "distill" and info["train_pairs"] == 600  # every pair, whatever its label
    assert info["teacher"]["fingerprint"] == minilm.fingerprint() and info["teacher"]["dim"] == 384
    assert info["teacher"]["source"] == "a model in memory" and info["config"]["teacher"] == "a model in memory"
    assert 0 < info["teacher"]["texts"] <= 2 * 700
    loaded = SiameseModel.load(student.save(tmp_path / "student"))  # no teacher needed to load
    assert loaded.dim == 64 and json.loads((tmp_path / "student" / "config.json").read_text())["loss"] == "distill"


def test_each_distinct_text_is_encoded_once(data_dir):
    texts = ["how do I learn python", "learning python fast", "best way to learn python", "what is a cat"]
    pairs = Pairs(
        text1=[texts[0], texts[0], texts[1], texts[3]],
        text2=[texts[1], texts[2], texts[2], texts[0]],
        labels=np.array([1, 0, 1, 0], dtype=np.int8),
    )
    val = Pairs(text1=[texts[3], "a new text"], text2=[texts[2], texts[1]], labels=np.array([0, 1], dtype=np.int8))
    teacher = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=16))
    calls = []
    encode = teacher.encode
    teacher.encode = lambda batch, **kw: calls.append(list(batch)) or encode(batch, **kw)
    train(
        pairs,
        val,
        model_config=ModelConfig(encoder="bow", loss="distill", dim=8),
        progress=False,
        config=TrainConfig(epochs=2, batch_size=4, workers=1, teacher=teacher),
    )
    assert len(calls) == 1 and sorted(calls[0]) == sorted(
        set(texts) | {"a new text"}
    )  # train and validation texts, once


def test_teacher_vectors_line_up_with_the_pairs():
    teacher = SiameseModel.build(["a b c", "d e f"], ModelConfig(encoder="bow", dim=8))
    vectors = TeacherVectors.encode(teacher, ["a b", "d e", "a b", "c"])
    assert list(vectors.index) == ["a b", "d e", "c"] and vectors.vectors.shape == (3, 8)
    np.testing.assert_allclose(vectors.vectors[vectors.rows(["c", "a b"])].numpy(), teacher.encode(["c", "a b"]))


def test_the_loss_matches_every_in_batch_score_to_the_teachers_cosine():
    torch.manual_seed(0)
    unit = lambda *shape: torch.nn.functional.normalize(torch.randn(*shape), dim=-1)  # noqa: E731
    a, b, ta, tb = unit(4, 6), unit(4, 6), unit(4, 10), unit(4, 10)  # teacher wider than the student
    loss = DistillLoss()(a, b, teacher=(ta, tb))
    s, t = torch.cat([a, b]), torch.cat([ta, tb])
    off = ~torch.eye(8, dtype=torch.bool)
    assert loss.item() == pytest.approx(((s @ s.T - t @ t.T)[off] ** 2).mean().item(), rel=1e-6)
    assert DistillLoss()(ta, tb, teacher=(ta, tb)).item() == pytest.approx(0.0, abs=1e-7)  # the teacher itself: no loss


def test_errors_are_one_line_and_come_before_any_work(sts, tmp_path):
    pairs = sts[0].subset(range(8))
    bow = ModelConfig(encoder="bow", loss="distill", dim=8)
    with pytest.raises(ConfigError, match="learns from a teacher: give one"):
        train(pairs, None, model_config=bow, config=TrainConfig(epochs=1), progress=False)
    with pytest.raises(ConfigError, match="used by loss 'distill' only"):
        train(
            pairs,
            None,
            model_config=ModelConfig(encoder="bow"),
            config=TrainConfig(epochs=1, teacher="mpnet"),
            progress=False,
        )
    with pytest.raises(ConfigError, match="works with heads cosine: its targets are the teacher's cosines"):
        check_head_and_loss("manhattan", "distill")
    with pytest.raises(ModelError, match="no such folder"):
        load_teacher(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        load_teacher(tmp_path / "empty")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text('{"hello": 1}')
    with pytest.raises(ModelError, match="neither a Siamese model"):
        load_teacher(tmp_path / "odd")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="invalid JSON"):
        load_teacher(tmp_path / "broken")
    manhattan = SiameseModel.build(pairs.text1, ModelConfig(encoder="bow", head="manhattan", dim=8)).save(
        tmp_path / "manhattan"
    )
    with pytest.raises(ConfigError, match="must be a cosine model"):
        train(pairs, None, model_config=bow, config=TrainConfig(epochs=1, teacher=manhattan), progress=False)


def test_the_layouts_pooling_is_read_or_refused(tmp_path):
    folder = tmp_path / "st"
    (folder / "1_Pooling").mkdir(parents=True)
    assert read_layout(folder).pooling == "mean"  # a plain Hugging Face folder
    modules = [
        {"type": "sentence_transformers.models.Transformer", "path": ""},
        {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"},
        {"type": "sentence_transformers.models.Normalize", "path": "2_Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    for settings, expected in (({"pooling_mode_mean_tokens": True}, "mean"), ({"pooling_mode_cls_token": True}, "cls")):
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(settings))
        assert read_layout(folder).pooling == expected
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ModelError, match="pooling max_tokens is not supported"):
        read_layout(folder)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (folder / "modules.json").write_text(
        json.dumps(modules + [{"type": "sentence_transformers.models.Dense", "path": "3"}])
    )
    with pytest.raises(ModelError, match="module 'Dense' is not supported"):
        read_layout(folder)


def test_cli_distills_from_a_teacher_folder(data_dir, tmp_path):
    rows = (data_dir / "mqp/mqp.csv").read_text(encoding="utf-8").splitlines()[:81]  # header + 80 real pairs
    (tmp_path / "mqp80.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    pairs = datasets.load("mqp", data_dir).subset(range(80))
    teacher = SiameseModel.build(pairs.text1 + pairs.text2, ModelConfig(encoder="bow", dim=16)).save(
        tmp_path / "teacher"
    )
    common = [
        "train",
        "--data",
        str(tmp_path / "mqp80.csv"),
        "--encoder",
        "lstm",
        "--dim",
        "16",
        "--loss",
        "distill",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--workers",
        "1",
        "-q",
    ]
    r = invoke(*common, "--teacher", str(teacher), "--out", str(tmp_path / "student"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["recipe"]["loss"] == "distill"
    info = json.loads((tmp_path / "student" / "config.json").read_text())["info"]["training"]
    assert info["teacher"]["source"] == str(teacher) and info["teacher"]["dim"] == 16
    r = invoke(*common, "--teacher", str(tmp_path / "nope"), "--out", str(tmp_path / "bad"))
    assert r.returncode == 2 and r.stderr.startswith("error: teacher ") and "no such folder" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
