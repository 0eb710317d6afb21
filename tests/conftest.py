"""Shared fixtures: the public data folder and one small model trained once per session."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from siamese import SiameseModel, TrainConfig, datasets, read_texts, train
from siamese.data.pairs import Pairs

REPO = Path(__file__).resolve().parents[1]

# One intra-op thread: the models here are tiny, and on a 2-core machine OpenMP threads that
# compete with any other busy process make the LSTM 50-100x slower. Results do not depend on it.
torch.set_num_threads(1)
# Encodings in fp32 (also in the CLI subprocesses, which inherit it): many tests compare
# transformer vectors with Hugging Face's own fp32 forward pass at 1e-5, which bf16 (the default
# on CPUs with native bf16) does not meet. tests/models/test_fast_transformer.py tests auto and bf16.
os.environ.setdefault("SIAMESE_PRECISION", "fp32")


# -- test tiers -----------------------------------------------------------------------------------
# unit:        no shared data, quick: `pytest -m unit` (under a minute, on any machine)
# integration: reads the shared data sets (every test that uses the data_dir fixture, directly or
#              through a fixture built on it: trained, model_path, small_calibrated, server ...)
# slow:        needs no shared data but takes seconds (a pretrained transformer, a subprocess, a C++
#              build, a soak): marked by hand, with @pytest.mark.slow or a module's pytestmark
# A test is unit when it is neither integration nor slow; the markers are set at collection.


def pytest_configure(config):
    config.addinivalue_line("markers", "unit: no shared data and quick (set at collection: not integration, not slow)")
    config.addinivalue_line("markers", "integration: uses the shared data sets (set at collection from data_dir)")
    config.addinivalue_line(
        "markers", "slow: no shared data, but seconds each (pretrained models, subprocesses, builds)"
    )


# -- optional parts of the install -----------------------------------------------------------------
# A test file that imports one of these where it is not installed is skipped, with the pip command,
# instead of failing to collect: the core install (pip install siamese) runs the rest of the suite.
OPTIONAL = {
    "faiss": "pip install faiss-cpu",
    "fastapi": "pip install 'siamese-sim[serve]'",
    "uvicorn": "pip install 'siamese-sim[serve]'",
    "prometheus_client": "pip install 'siamese-sim[serve]'",
    "ray": "pip install 'siamese-sim[ray]'",
    "PIL": "pip install 'siamese-sim[emoji]'",
    "matplotlib": "pip install 'siamese-sim[report]'",
    "transformers": "pip install 'siamese-sim[transformer]'",
    "onnx": "pip install 'siamese-sim[onnx]'",
    "onnxruntime": "pip install 'siamese-sim[onnx]'",
    "hypothesis": "pip install 'siamese-sim[test]'",
    "sentence_transformers": "pip install 'siamese-sim[test]'",
}
_MISSING = re.compile(r"No module named '([\w.]+)'|import of ([\w.]+) halted|'([\w.]+)' is not installed")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if report.failed and isinstance(collector, pytest.Module):
        found = _MISSING.search(str(report.longrepr))
        module = next((g for g in found.groups() if g), "").split(".")[0] if found else ""
        if module in OPTIONAL:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, f"Skipped: {module} is not installed ({OPTIONAL[module]})")
    return report


# The longest files (minutes of the suite's ~25 CPU-minutes, junit times of 2026-11-28) run first:
# `make test`'s `-n 2 --dist loadfile` hands files to the two workers in collection order, and a
# long file handed out last keeps one worker busy while the other waits.
RUN_FIRST = [
    "test_readme.py",
    "training/test_learn_bench.py",
    "search/test_ray_engine.py",
    "test_nothing_lost_3.py",
    "emoji/test_emoji.py",
    "test_examples.py",
    "distill/test_static_student.py",
    "search/test_cascade.py",
    "models/test_fast_transformer.py",
    "cross/test_cross.py",
    "label/test_label_learn.py",
]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "data_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)
        elif item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.unit)
    first = {name: rank for rank, name in enumerate(RUN_FIRST)}
    here = Path(__file__).resolve().parent
    rank = {}
    for item in items:
        path = Path(item.path)
        if path not in rank:
            name = path.relative_to(here).as_posix() if path.is_relative_to(here) else path.name
            rank[path] = first.get(name, len(first))
    items.sort(key=lambda item: rank[Path(item.path)])  # stable: the rest keep their order


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared public data sets ($SIAMESE_DATA, else shared/data beside the repository)."""
    root = datasets.data_root(os.environ.get("SIAMESE_DATA") or REPO.parent / "shared" / "data")
    if not datasets.available(root):
        pytest.skip(f"shared data sets not found at {root} (set SIAMESE_DATA to the folder holding them)")
    return root


@dataclass
class Trained:
    model: SiameseModel  # the in-memory model returned by train()
    path: Path  # the same model saved to disk
    train_pairs: Pairs
    val_pairs: Pairs


TRAIN_SETS = ["paws-qqp-train", "msrp-train"]
VAL_SET = "msrp-val"


@pytest.fixture(scope="session")
def trained(data_dir, tmp_path_factory) -> Trained:
    """A small Siamese LSTM: 2 epochs on the duplicates of PAWS-QQP train + MSRP train (~6k pairs)."""
    train_pairs = datasets.load_many(TRAIN_SETS, data_dir)
    val_pairs = datasets.load(VAL_SET, data_dir)
    model = train(train_pairs, val_pairs, config=TrainConfig(epochs=2, seed=0), progress=False)
    path = model.save(tmp_path_factory.mktemp("trained") / "model")
    return Trained(model, path, train_pairs, val_pairs)


@pytest.fixture(scope="session")
def model_path(trained) -> Path:
    return trained.path


@pytest.fixture(scope="session")
def small_calibrated(data_dir, tmp_path_factory) -> Trained:
    """A quick model for the calibration, scoring and report tests: a 32-wide LSTM, 1 epoch on
    800 MSRP train duplicates, validated (threshold and calibration) on MSRP val. Saved once:
    tests that change its folder work on a copy."""
    from siamese import ModelConfig

    train_pairs = datasets.load("msrp-train", data_dir).positives().subset(range(800))
    val_pairs = datasets.load("msrp-val", data_dir)
    model = train(
        train_pairs,
        val_pairs,
        model_config=ModelConfig(dim=32, seed=0),
        config=TrainConfig(epochs=1, batch_size=64, seed=0),
        progress=False,
    )
    path = model.save(tmp_path_factory.mktemp("calibrated") / "model")
    return Trained(model, path, train_pairs, val_pairs)


# -- a pretrained-style tokenizer whose padding id is not 0 -------------------------------------


def make_wordpiece(folder: Path, *, pad: str | None = "<pad>", padding: bool = True) -> Path:
    """A small RoBERTa/MPNet-like WordPiece tokenizer.json: <s>=0, <pad>=1, </s>=2, and an unused
    "[PAD]" further on (MPNet's vocabulary has one too)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = [
        "<s>",
        pad or "<nopad>",
        "</s>",
        "[UNK]",
        "hello",
        "world",
        "[PAD]" if pad else "[NOPAD]",
        "how",
        "are",
        "you",
        "##s",
    ]
    tok = Tokenizer(WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tok.add_special_tokens([w for w in vocab[:4] if w != "<nopad>"])
    if padding and pad:
        tok.enable_padding(pad_id=1, pad_token=pad, length=16)  # fixed length, as some hub files ship
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture
def wordpiece():
    return make_wordpiece


# -- the command line, in this process ------------------------------------------------------------


@dataclass
class Ran:
    """A finished ``siamese`` command, with the fields of the subprocess.CompletedProcess it replaces."""

    returncode: int
    stdout: str
    stderr: str


def invoke(*args, env: dict | None = None) -> Ran:
    """``siamese ARGS`` run in this process by Typer's CliRunner: what a subprocess would print and
    return, without its start-up (torch imported again, a few seconds each on a busy machine). An
    exception the command did not turn into an exit code is raised here, so the test fails on it
    as the real command would (exit 1 and a traceback). A few tests keep running the installed
    script (SCRIPT below): the console entry point itself, a kill, a server."""
    from typer.testing import CliRunner

    from siamese.cli import app

    result = CliRunner(env=env).invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


# -- the commands as the tests run them ------------------------------------------------------------------


def script(*args, check_ok: bool = True) -> subprocess.CompletedProcess:
    """The installed console script in a subprocess."""
    assert SCRIPT.is_file(), f"{SCRIPT} missing: install the package with pip install -e ."
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # see conftest: tiny models, shared 2-core machine
    proc = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env, timeout=600)
    if check_ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def run(*args, check_ok: bool = True):
    """The command in this process."""
    proc = invoke(*args)
    if check_ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def run_json(*args, run=run) -> dict:
    proc = run(*args, "--json")
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout  # nothing but the JSON on stdout
    return json.loads(lines[0])


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one line, no traceback
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert proc.stdout == ""
    return lines[0]


# -- explanations (tests/evaluation/test_explain.py, tests/distill/test_static_student.py) ----------------

EXPLAIN_PAIRS = [
    ("How do I learn Python quickly?", "What is the fastest way to learn python?"),
    ("Why is the sky blue during the day?", "Why does the sky look blue?"),
    ("Can I cancel my car insurance online?", "How do I cook rice in a microwave?"),
    ("state-of-the-art results, 2024!", "???"),
]  # punctuation only: its one token is [UNK]


def assert_exact_shares(model: SiameseModel, pairs=EXPLAIN_PAIRS) -> None:
    """``model.explain`` is exact on ``pairs``: one share per word, which add up to the similarity."""
    expected = model.similarity_pairwise([a for a, _ in pairs], [b for _, b in pairs])
    for (a, b), sim in zip(pairs, expected):
        e = model.explain(a, b)
        assert e.method == "exact"
        assert e.similarity == pytest.approx(float(sim), abs=1e-5)
        for text, words in ((a, e.text1), (b, e.text2)):
            assert [w.word for w in words] == text.split()
            assert all(text[w.start : w.end] == w.word for w in words)
            assert sum(w.weight for w in words) == pytest.approx(float(sim), abs=1e-5), (a, b, words)


# -- a real HTTP server on 127.0.0.1 (tests/serve/test_serve.py, tests/serve/test_web.py) ---------------------

SCRIPT = Path(sys.executable).parent / "siamese"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, path: str, body=None, *, raw: bytes | None = None, headers=()) -> tuple[int, dict]:
    """A JSON request to a test server (POST with a body, else GET): (status, decoded answer), 4xx included."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json", **dict(headers)})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    port: int
    proc: subprocess.Popen
    log: Path  # the server's stderr (its access log)


@contextlib.contextmanager
def serving(model_path, index_path=None, *args: str, log: Path | None = None, env: dict | None = None):
    """``siamese serve`` in a subprocess on a free 127.0.0.1 port; yields its base URL (or, with
    ``log`` given, a Served whose log file holds its stderr). Extra ``args`` go to the command."""
    port = free_port()
    extra = ["--index", str(index_path)] if index_path else []
    log_file = Path(log) if log else Path(os.devnull)
    with open(log_file, "w") as stderr:  # a file, not a pipe: a full pipe would stall the server
        proc = subprocess.Popen(
            [str(SCRIPT), "serve", str(model_path), *extra, "--port", str(port), *args],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            env={**os.environ, **(env or {})},
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None:
                    pytest.fail(f"server exited: {log_file.read_text() if log else proc.returncode}")
                time.sleep(0.2)
        else:
            pytest.fail("server did not start within 60 s")
        yield Served(base, port, proc, log_file) if log else base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def server(model_path, data_dir, tmp_path_factory):
    pytest.importorskip("fastapi", reason="the web stack is not installed (pip install 'siamese-sim[serve]')")
    from siamese.search import DuplicateIndex  # FAISS: imported by the tests that search, not here

    model = SiameseModel.load(model_path)
    index = DuplicateIndex(model)
    index.add(read_texts(data_dir / "insuranceqa/questions.csv", "question")[:3000])
    idx = index.save(tmp_path_factory.mktemp("serve") / "idx")
    with serving(model_path, idx) as base:
        yield base, model, index


# Debian's headless Chromium through Playwright (its own browser download is not used), one per test file.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where the browser tests leave their screenshots for a person to look at:
    $SIAMESE_TEST_ARTIFACTS, else tests/artifacts (git-ignored)."""
    folder = Path(os.environ.get("SIAMESE_TEST_ARTIFACTS") or Path(__file__).parent / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()
