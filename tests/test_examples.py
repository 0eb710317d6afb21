"""Every example under examples/ runs, as a user runs it (a subprocess, in an empty folder), on
small data, and prints what its guide says it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
pytestmark = pytest.mark.slow  # subprocesses that load models


def run_example(name: str, *args: str, cwd: Path, data_dir: Path) -> str:
    env = {**os.environ, "SIAMESE_DATA": str(data_dir), "PYTHONPATH": str(EXAMPLES.parent)}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_duplicates(data_dir, tmp_path):
    out = run_example("duplicates", "sick-trial", cwd=tmp_path, data_dir=data_dir)
    assert "duplicate      'When will I see you?' / 'When can I see you again?'" in out
    assert "not duplicate  'Do they enjoy eating the dessert?' / 'Do they like hiking in the desert?'" in out


def test_dedupe(data_dir, tmp_path):
    out = run_example("dedupe", "300", cwd=tmp_path, data_dir=data_dir)
    assert out.startswith("300 questions: ") and "kept: " in out


def test_search(data_dir, tmp_path):
    out = run_example("search", "500", cwd=tmp_path, data_dir=data_dir)
    lines = out.strip().splitlines()
    assert len(lines) == 5 and all("renters insurance" in line.lower() for line in lines[:2])


def test_serve(data_dir, tmp_path):
    out = run_example("serve", cwd=tmp_path, data_dir=data_dir)
    assert '"similarity"' in out and '"duplicate"' in out


def test_train(data_dir, tmp_path):
    out = run_example("train", "1", str(tmp_path / "model"), cwd=tmp_path, data_dir=data_dir)
    assert "MSRP test: ROC-AUC" in out and (tmp_path / "model" / "README.md").is_file()


def test_student(data_dir, tmp_path):
    out = run_example("student", "800", cwd=tmp_path, data_dir=data_dir)
    assert "student distilled on 800 sentences" in out and "student: ROC-AUC on 400 STS-B test pairs" in out


def test_emoji(data_dir, tmp_path):
    out = run_example("emoji", "1", str(tmp_path / "emoji"), cwd=tmp_path, data_dir=data_dir)
    assert "PNG sheets in" in out and list((tmp_path / "emoji" / "sheets").glob("*.png"))
