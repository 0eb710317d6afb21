"""One decision for every trainer (siamese.decision.decide): the threshold and calibration are chosen on
the validation pairs, and too few or one-sided ones fall back to the training pairs or the head's
default, saying so. The CLI case: 30 validation pairs chose 0.9969 (recall 0.03)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from siamese import datasets
from siamese.decision.decide import MIN_VAL_PAIRS, decide, too_few
from siamese.evaluation.metrics import choose_threshold
from siamese.models.siamese import ModelConfig
from siamese.training.bi_encoder import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]


def overlap(text1, text2) -> np.ndarray:
    """A real, independent similarity: the Jaccard overlap of the two texts' lowercased words."""
    sims = []
    for a, b in zip(text1, text2, strict=True):
        wa, wb = set(a.lower().split()), set(b.lower().split())
        sims.append(len(wa & wb) / max(1, len(wa | wb)))
    return np.array(sims)


@pytest.fixture(scope="module")
def msrp(data_dir):
    return datasets.load("msrp-train", data_dir)


def test_enough_validation_pairs_choose_the_threshold_and_calibrate(msrp):
    val = msrp.subset(np.arange(400))
    decision = decide(overlap, val, msrp, default=0.7)
    expected, _ = choose_threshold(overlap(val.text1, val.text2), val.labels)
    assert decision.threshold == expected
    assert decision.choice["split"] == "validation" and "note" not in decision.choice
    assert decision.calibration["fitted"] and decision.calibrator is not None


def test_too_few_validation_pairs_fall_back_to_the_training_pairs_and_say_so(msrp):
    val = msrp.subset(np.arange(30))
    train_pairs = msrp.subset(np.arange(30, 1030))
    assert too_few(val) is not None
    decision = decide(overlap, val, train_pairs, default=0.7)
    expected, _ = choose_threshold(overlap(train_pairs.text1, train_pairs.text2), train_pairs.labels)
    assert decision.threshold == expected
    assert decision.choice["split"] == "training" and decision.choice["pairs"] == 1000
    assert "30 validation pairs" in decision.choice["note"] and str(MIN_VAL_PAIRS) in decision.choice["note"]
    assert not decision.calibration["fitted"] and "30 validation pairs" in decision.calibration["note"]


def test_one_sided_validation_pairs_and_no_labelled_training_pairs_keep_the_default(msrp):
    duplicates = msrp.positives()
    decision = decide(overlap, duplicates.subset(np.arange(200)), duplicates, default=0.7)
    assert decision.threshold == 0.7 and decision.choice["split"] is None
    assert "one label only" in decision.choice["note"] and "default" in decision.choice["note"]


def test_a_target_on_one_sided_pairs_is_refused(msrp):
    from siamese.errors import DataError

    with pytest.raises(DataError, match="both labels"):
        decide(overlap, msrp.positives().subset(np.arange(100)), msrp, default=0.7, target_precision=0.9)


def test_a_bi_encoder_trained_with_a_tiny_validation_set_chooses_on_its_training_pairs(msrp):
    pairs, val = msrp.subset(np.arange(40, 640)), msrp.subset(np.arange(40))
    model = train(
        pairs, val, model_config=ModelConfig(dim=32), config=TrainConfig(epochs=1, batch_size=64), progress=False
    )
    info = model.info["training"]
    assert info["threshold_choice"]["split"] == "training" and info["threshold_choice"]["pairs"] == 600
    expected, _ = choose_threshold(model.similarity_pairwise(pairs.text1, pairs.text2), pairs.labels)
    assert model.threshold == pytest.approx(expected)
    assert info["trains_on"] == "positives" and info["given_pairs"] == 600


def test_cli_on_the_quora_sample_says_how_it_chose_and_which_pairs_it_trained_on(data_dir, tmp_path):
    """300 Quora pairs ( 30 validation pairs chose 0.9969, recall 0.03)."""
    sample = data_dir / "quora" / "quora_question_pairs_sample300.csv"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "siamese", "train", "--data", str(sample), "--epochs", "2", "-q"]
    text = subprocess.run([*args, "--out", str(tmp_path / "m")], capture_output=True, text=True, env=env, timeout=600)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("trained on 102 duplicate pairs of 270: the triplet loss learns from duplicates")
    assert lines[1].startswith("threshold 0.") and len(lines[1].split()[1]) == 5  # rounded for people: 0.xxx
    assert "chosen on 270 training pairs" in lines[1] and "only 30 validation pairs" in lines[1]
    out = subprocess.run(
        [*args, "--out", str(tmp_path / "j"), "--json"], capture_output=True, text=True, env=env, timeout=600
    )
    result = json.loads(out.stdout)
    assert result["threshold_choice"]["split"] == "training" and result["trains_on"] == "positives"
    assert len(repr(result["threshold"])) > 7  # full precision in --json
    evaluated = subprocess.run(
        [sys.executable, "-m", "siamese", "evaluate", str(tmp_path / "j"), "--data", str(sample), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert json.loads(evaluated.stdout)["recall"] > 0.3  # not the 0.03 of a threshold chosen on 30 pairs
