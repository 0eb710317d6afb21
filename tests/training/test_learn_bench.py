"""bench/learn.py (make bench-learn) runs end to end at a tiny size: one set, one budget, one seed,
every contender, so the grid the benchmark runs is known to work. The set's pool is capped at 300
pairs instead of 4,000 (the cap is the module's POOL_CAP): encoding the whole pool with MiniLM was
most of the minutes this took."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_learning_curve_bench_runs_every_contender(data_dir, tmp_path):
    pytest.importorskip("sentence_transformers", reason="the st contender needs the bench extra")
    out = tmp_path / "learn.json"
    # bench/learn.py's main() as `python bench/learn.py ARGS` runs it, with a smaller pool cap
    code = "import sys, learn; assert learn.POOL_CAP > 300; learn.POOL_CAP = 300; sys.argv[0] = learn.__file__; "
    code += "learn.main()"
    env = {k: v for k, v in os.environ.items() if k != "SIAMESE_PRECISION"}  # the precision `make bench-learn` runs in
    ran = subprocess.run(
        [sys.executable, "-c", code, "--sets", "mqp", "--budgets", "40", "--seeds", "1", "--test-cap", "120",
         "--out", str(out)],
        env={**env, "PYTHONPATH": os.pathsep.join([str(REPO / "bench"), str(REPO)]), "SIAMESE_DATA": str(data_dir)},
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(out.read_text())["sets"]["mqp"]
    assert result["info"]["test"] == 120 and result["info"]["pool"] == 300
    assert 0.5 < result["oracle"]["accuracy"] <= 1.0
    run = result["budgets"]["40"]["runs"][0]
    assert run["labels"] == 40
    for contender in ("threshold", "learn", "st", "cross"):
        assert 0.0 < run[contender]["accuracy"] <= 1.0 and run[contender]["roc_auc"] is not None
    assert run["threshold"]["accuracy"] <= result["oracle"]["accuracy"]  # the oracle is the ceiling of a threshold
    assert run["learn"]["chosen"] in ("fine-tuned", "as-is") and run["learn"]["peak_mb"] > 100
    # the cascade: the same learned model proposes (its own verdicts as the learn contender's), the cross-encoder
    # decides the band's pairs
    cascade = run["cascade"]
    assert 0.0 < cascade["accuracy"] <= 1.0 and cascade["roc_auc"] is None and 0.0 < cascade["verified"] <= 1.0
    assert cascade["learn_accuracy"] == pytest.approx(run["learn"]["accuracy"], abs=0.02)
    # the band chosen on a grouped quarter of the labels that neither model saw: symmetric about the threshold
    chosen = run["cascade-labels"]
    assert 0.0 < chosen["accuracy"] <= 1.0 and 0.0 <= chosen["verified"] <= 1.0
    assert chosen["band"]["sampled"] < 40 and chosen["band"]["hi"] >= chosen["band"]["lo"]
    assert "| mqp | 40 |" in out.with_suffix(".md").read_text()
