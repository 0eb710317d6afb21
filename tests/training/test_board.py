"""``siamese train --log-dir``: TensorBoard logs of every step's loss and each epoch's record,
read back with TensorBoard's own reader; without the tensorboard package, one line saying how to
install it and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def train_args(data_dir, tmp_path, *extra):
    msrp = data_dir / "msrp"
    return [
        "train",
        "--data",
        str(msrp / "msr-para-train.tsv"),
        "--val-data",
        str(msrp / "msr-para-val.tsv"),
        "--encoder",
        "bow",
        "--epochs",
        "2",
        "--batch-size",
        "512",
        "--out",
        str(tmp_path / "m"),
        "-q",
        *extra,
    ]


def test_log_dir_holds_the_step_losses_and_epoch_records(data_dir, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = train_args(data_dir, tmp_path, "--log-dir", str(tmp_path / "logs"), "--json")
    proc = subprocess.run(
        [sys.executable, "-m", "siamese", *args], capture_output=True, text=True, env=ENV, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    events = EventAccumulator(str(tmp_path / "logs"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/step_loss", "epoch/loss", "epoch/val_loss"} <= set(tags)
    steps = events.Scalars("train/step_loss")
    batches = 2 * -(-json.loads(proc.stdout)["train_pairs"] // 512)  # 2 epochs of ceil(pairs / 512)
    assert [s.step for s in steps] == list(range(batches))
    assert [e.step for e in events.Scalars("epoch/val_loss")] == [1, 2]
    history = json.loads((tmp_path / "m" / "config.json").read_text())["info"]["training"]["history"]
    assert [e.value for e in events.Scalars("epoch/loss")] == pytest.approx([h["loss"] for h in history])


def test_log_dir_without_tensorboard_is_one_line_naming_the_install(data_dir, tmp_path):
    code = (
        "import sys; sys.modules['tensorboard'] = None; sys.argv = ['siamese', *sys.argv[1:]]; "
        "from siamese.cli import main; main()"
    )
    args = train_args(data_dir, tmp_path, "--log-dir", str(tmp_path / "logs"))
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=ENV, timeout=600)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --log-dir {tmp_path / 'logs'}: TensorBoard logging needs the tensorboard package: "
        "pip install 'siamese-sim[board]'"
    ]
    assert not (tmp_path / "m").exists() and not (tmp_path / "logs").exists()
