"""bench/gpu.py (make gpu-check) runs end to end: here on the CPU at tiny sizes (--quick), so the
script a session with a GPU runs is known to work before that session spends its device time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_gpu_check_runs_every_family_on_the_cpu(data_dir, tmp_path):
    pytest.importorskip("transformers", reason="the transformer rows need siamese-sim[transformer]")
    out = tmp_path / "gpu.json"
    ran = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            str(REPO / "bench" / "gpu.py"),
            "--device",
            "cpu",
            "--quick",
            "--out",
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO), "SIAMESE_DATA": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["quick"] is True
    families = result["families"]
    words = {"lstm", "bilstm+l1+bce", "cnn+contrastive", "bow+cosent"}
    assert set(families) == words | {"transformer+mnr", "cross-encoder", "distill"}
    for name in words:
        assert families[name]["pairs_per_second"] > 0 and families[name]["warmup_seconds"] > 0
    assert families["transformer+mnr"]["siamese"]["pairs_per_second"] > 0
    assert families["cross-encoder"]["siamese"]["pairs_per_second"] > 0
    assert families["distill"]["student_device"] == "cpu"
    encode = result["encode"]
    assert encode["texts"] == 200 and encode["siamese_fp32"]["texts_per_second"] > 0
    if result["sentence_transformers"]:  # the same weights through both libraries: the same vectors
        assert encode["cosine_fp32_vs_st"]["min"] > 0.9999
        assert families["cross-encoder"]["ratio"] > 0 and families["transformer+mnr"]["ratio"] > 0
    assert "| encode fp32 texts/s |" in ran.stdout
