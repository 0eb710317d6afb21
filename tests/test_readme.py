"""README.md's quickstarts run as written: every command of its command-line block, in a clone's
place beside the shared data in ../shared/data (no SIAMESE_DATA), then its Python block in the same
folder. Only sizes are changed, where a command would take minutes on 2 cores: in the shared
folder the test builds, the InsuranceQA questions cut to their first 600, the MQP pairs to their
first 160 (`train --from minilm` and `siamese.learn` read them) and the validation sets to their first
200 pairs each (the files and their formats as they are), and the settings in SMALL added to a command."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow

# Added to a command (by its first words) to keep the test to minutes: sizes, never another input.
SMALL = {
    "siamese train": ["--epochs", "1"],
    "siamese distill": ["--data", "corpus.txt", "--vocabulary", "words", "--epochs", "1"],
}


def block(markdown: str, heading: str, language: str) -> str:
    """The first ```language block after ``heading``."""
    section = markdown[markdown.index(heading) :]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def commands(markdown: str) -> list[list[str]]:
    return [
        shlex.split(line, comments=True)
        for line in block(markdown, "## Quickstart: the command line", "bash").splitlines()
        if line.strip()
    ]


# Files cut to their first lines in the clone's shared folder (a header line counted): the commands
# read them as they read the whole files, in minutes less (MQP: `train --from minilm`; the
# validation sets: the threshold of `pretrained` and `distill`).
CUT = {
    "insuranceqa/questions.csv": 601,
    "mqp/mqp.csv": 161,
    "msrp/msr-para-val.tsv": 201,
    "stsbenchmark/sts-dev.csv": 200,  # no header
    "sick/SICK_trial.txt": 201,
}


def shared_copy(data_dir: Path, shared: Path, cut: dict[str, int]) -> None:
    """``shared``: ``data_dir`` linked entry by entry, but the files of ``cut`` written cut."""
    shared.mkdir(parents=True)
    for entry in data_dir.iterdir():
        if entry.name in cut:
            lines = entry.read_text(encoding="utf-8").splitlines()
            (shared / entry.name).write_text("\n".join(lines[: cut[entry.name]]) + "\n", encoding="utf-8")
        elif inside := {k.split("/", 1)[1]: n for k, n in cut.items() if k.startswith(entry.name + "/")}:
            shared_copy(entry, shared / entry.name, inside)
        else:
            (shared / entry.name).symlink_to(entry)


@pytest.fixture
def clone(data_dir, tmp_path) -> Path:
    """A clone's folder with ../shared/data beside it: the real data sets, the files of CUT cut."""
    shared_copy(data_dir, tmp_path / "shared" / "data", CUT)
    lines = (data_dir / "insuranceqa" / "questions.csv").read_text(encoding="utf-8").splitlines()
    work = tmp_path / "clone"
    work.mkdir()
    (work / "corpus.txt").write_text("\n".join(line.split(",")[3] for line in lines[1:301]) + "\n", encoding="utf-8")
    return work


def run_env() -> dict:
    # ../shared/data, as the README says; the precision a user's machine picks (the suite's fp32 is for
    # comparisons with Hugging Face's own forward pass, which this test does not make)
    env = {k: v for k, v in os.environ.items() if k not in ("SIAMESE_DATA", "SIAMESE_PRECISION")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # `siamese` as installed
    return env


def serve_and_search(argv: list[str], cwd: Path, env: dict) -> dict:
    port = free_port()
    with open(cwd / "serve.log", "w") as log:
        proc = subprocess.Popen([*argv, "--port", str(port)], cwd=cwd, env=env, stdout=log, stderr=log)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, (cwd / "serve.log").read_text()[-2000:]
                time.sleep(0.5)
        # the request the README shows in its note on serve
        body = json.dumps({"query": "How do I cancel my car insurance?", "k": 3}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/search", data=body, headers={"content-type": "application/json"}
        )
        return json.loads(urllib.request.urlopen(request, timeout=60).read())
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_every_readme_command_runs_as_written(clone):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    env = run_env()
    ran = []
    for argv in commands(readme):
        assert argv[0] == "siamese", argv
        if argv[:2] == ["siamese", "serve"]:
            found = serve_and_search(argv, clone, env)
            assert len(found["hits"]) == 3 and all(h["id"].isdigit() for h in found["hits"])  # qids
            ran.append("serve")
            continue
        extra = SMALL.get(" ".join(argv[:2]), [])
        started = time.monotonic()
        done = subprocess.run(argv + extra, cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, (argv, done.stdout[-1000:], done.stderr[-2000:])
        print(f"{' '.join(argv[:3])}: {time.monotonic() - started:.0f} s")  # shown by pytest -s, or on a failure
        ran.append(" ".join(argv[:3]))
    assert len(ran) >= 10
    assert (clone / "models" / "minilm" / "config.json").is_file()
    built = json.loads((clone / "idx" / "index.json").read_text())
    assert built["size"] == 600

    code = block(readme, "## Quickstart: Python", "python")
    done = subprocess.run([sys.executable, "-c", code], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_readme_says_what_pretrained_needs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "../shared/data" in readme and "--val-data" in readme
    for argv in commands(readme):
        for arg in argv:
            if "/" in arg and arg.endswith((".csv", ".txt", ".tsv")):
                assert arg.startswith("../shared/data/"), arg  # no file the reader does not have
