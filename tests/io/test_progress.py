"""Progress when stderr is not a terminal (a log file, a pipe, CI): each long command writes a
plain line every $SIAMESE_PROGRESS_SECONDS with what is done of the total, the rate and the time
left, and never a bar's carriage returns."""

from __future__ import annotations

import io
import os
import re
import subprocess
import time

import pytest
from conftest import SCRIPT

from siamese.io import progress
from siamese.io.progress import duration, tqdm

# "encode: 4,096/16,889 texts (24%), 812.3 texts/s, 15 s left" (or "..., 3 s so far" past the total)
LINE = re.compile(
    r"^(?P<desc>[\w /]+): (?P<done>[\d,]+)/(?P<total>[\d,]+) (?P<unit>\w+) \((?P<pct>\d+)%\), "
    r"(?P<rate>[\d,.]+) (?P=unit)/s, (?:(?P<left>.+) left|.+ so far)"
)
FINAL = re.compile(r"^(?P<desc>[\w /]+): (?P<done>[\d,]+)/(?P<total>[\d,]+) (?P<unit>\w+) \(\d+%\) in .+ \(.+/s\)$")


def test_a_bar_is_a_line_every_interval_with_the_rate_and_the_time_left(monkeypatch):
    monkeypatch.setenv("SIAMESE_PROGRESS_SECONDS", "0.05")
    out = io.StringIO()
    with tqdm(total=40, desc="encode", unit="text", file=out) as bar:
        for _ in range(40):
            time.sleep(0.01)
            bar.update(1)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    if lines[0] == "encode: 0/40 texts (0%), started 0 s ago":  # a loaded machine: the first step took an interval
        lines = lines[1:]
    found = [LINE.match(line) for line in lines[:-1]]
    assert len(found) >= 3 and all(found), lines
    assert all(m["desc"] == "encode" and m["total"] == "40" and m["unit"] == "texts" for m in found)
    assert [int(m["done"]) for m in found] == sorted(int(m["done"]) for m in found)
    assert any(m["left"] for m in found)
    assert FINAL.match(lines[-1]), lines[-1]  # the bar ran past an interval: it says when it finished


def test_a_line_comes_while_one_long_step_runs_and_a_short_bar_stays_quiet(monkeypatch):
    monkeypatch.setenv("SIAMESE_PROGRESS_SECONDS", "0.05")
    out = io.StringIO()
    with tqdm(total=3, desc="neighbours", unit="text", file=out):
        time.sleep(0.3)  # no update at all: the background thread still reports
    assert "started" in out.getvalue().splitlines()[0]
    monkeypatch.setenv("SIAMESE_PROGRESS_SECONDS", "30")
    quiet = io.StringIO()
    with tqdm(total=3, desc="encode", unit="text", file=quiet) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""  # done within one interval of the last line: no line at all


def test_short_steps_one_after_another_are_never_silent_for_more_than_an_interval(monkeypatch):
    """Each step under one interval wrote nothing: five 0.1 s steps at 0.25 s were 0.5 s of silence."""
    monkeypatch.setenv("SIAMESE_PROGRESS_SECONDS", "0.25")
    out = io.StringIO()
    tqdm.write("starting", file=out)
    started = time.monotonic()
    for step in range(5):
        with tqdm(total=1, desc=f"step {step}", unit="pair", file=out) as bar:
            time.sleep(0.1)
            bar.update(1)
    took = time.monotonic() - started  # 0.5 s, more on a loaded machine
    lines = out.getvalue().splitlines()
    # a line about every 0.25 s, from whichever step runs then
    assert 2 <= len(lines) - 1 <= took / 0.25 + 1, (lines, took)
    assert all(line.startswith("step ") for line in lines[1:]), lines


def test_the_interval_and_the_durations(monkeypatch):
    for value, expected in [("2.5", 2.5), ("0", 15.0), ("-1", 15.0), ("nan", 15.0), ("soon", 15.0)]:
        monkeypatch.setenv("SIAMESE_PROGRESS_SECONDS", value)
        assert progress.interval() == expected  # a bad value never stops a command
    assert [duration(s) for s in (4.4, 65, 3725)] == ["4 s", "1 min 05 s", "1 h 02 min"]


def _run_piped(*args, cwd) -> tuple[subprocess.CompletedProcess, list[re.Match]]:
    """The installed command with stderr a pipe (not a terminal), lines every 0.05 s."""
    env = {**os.environ, "SIAMESE_PROGRESS_SECONDS": "0.05", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\r" not in done.stderr  # no bar redraws in a log
    return done, [m for m in map(LINE.match, done.stderr.splitlines()) if m]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "descs"),
    [
        ("train", {"epoch 1/1"}),
        ("dedupe", {"encode", "neighbours"}),
        ("index build", {"encode"}),
        ("score", {"score"}),
        ("label replay", {"encode", "replay"}),
    ],
)
def test_every_long_command_reports_under_a_pipe(command, descs, data_dir, small_calibrated, tmp_path):
    model, questions = small_calibrated.path, data_dir / "insuranceqa" / "questions.csv"
    args = {
        "train": ["train", "--data", data_dir / "mqp" / "mqp.csv", "--out", "m", "--epochs", "1", "--dim", "16"],
        "dedupe": ["dedupe", model, "--data", questions, "--out", "run"],
        "index build": ["index", "build", model, "--data", questions, "--out", "idx"],
        "score": ["score", model, "--data", data_dir / "mqp" / "mqp.csv", "--out", "s.csv", "--batch-size", "64"],
        "label replay": [
            "label",
            model,
            "--data",
            questions,
            "--out",
            "l.csv",
            "--oracle-column",
            "answer_ids",
            "--budget",
            "60",
        ],
    }[command]
    done, lines = _run_piped(*args, cwd=tmp_path)
    # a step quicker than an interval (an epoch of 6 batches) shows as its started and final lines
    ends = [m for m in map(FINAL.match, done.stderr.splitlines()) if m]
    seen = {m["desc"] for m in lines + ends}
    assert descs <= seen, done.stderr[-2000:]
    for m in lines:
        assert int(m["done"].replace(",", "")) <= int(m["total"].replace(",", "")) or m["desc"] == "score"
    if command in ("dedupe", "index build"):
        assert any(m["total"] == "16,889" and m["unit"] == "texts" for m in lines if m["desc"] == "encode")
