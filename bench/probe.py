"""The hostile probe, in one command: bad input files, kill -9 mid-write, damaged
folders, concurrent writers and outputs aimed at inputs; writes under a file-size limit
and on a full disk, SIGTERM mid-write, Host headers naming other sites, a flood of tabs at the
labelling queue, CR-only and unterminated files, transformer configs asking for the impossible,
against the ``siamese`` commands and servers.

    python bench/probe.py [--minutes 10] [--out bench/results/robustness.json]   (make bench-robustness)

A trial is clean when the command does what it should: a one-line ``error: ...`` and exit code 2
for bad input or a damaged folder (nothing written), or a right result for odd but valid input,
whose outputs are valid UTF-8 without NUL bytes; after a kill, the next command on the target
works and leaves nothing beside it; concurrent writers all succeed and lose nothing; an output
aimed at an input is refused and the input is unchanged. A traceback, a signal (a Bus error), a
hang, or anything else is a failure.

Commands run in long-lived worker processes (``--worker``: siamese imported once; Typer's
CliRunner, so a traceback is seen as the exception it is). A signal kills the worker, which is
seen and restarted. Kills and concurrent writers are real processes forked from a worker that has
imported siamese but runs nothing itself. A small bag-of-words model is trained first (seconds).
Each group runs until its trial count or its share of ``--minutes``, whichever comes first: the
counts in the results say how many trials were run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]


# -- worker side ------------------------------------------------------------------------------------------------


def worker_main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # FAISS's C printf goes to stderr, not into the protocol
    import torch
    from typer.testing import CliRunner

    from siamese.cli import app

    torch.set_num_threads(1)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "run":
            result = CliRunner().invoke(app, req["args"])
            exc = result.exception
            tb = None if exc is None or isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"[:300]
            reply = {"rc": result.exit_code, "stdout": result.stdout[-4000:], "stderr": result.stderr[-2000:]}
            proto.write(json.dumps({**reply, "exception": tb}) + "\n")
        elif req["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                _child(req["args"], fsize=req.get("fsize"), stderr=req.get("stderr"), env=req.get("env"))
            proto.write(json.dumps({"pid": pid}) + "\n")
        elif req["op"] == "wait":
            _, status = os.waitpid(req["pid"], 0)
            proto.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")


def _child(args: list[str], *, fsize: int | None = None, stderr: str | None = None, env: dict | None = None) -> None:
    """A forked command: its own process, as `siamese ARGS` would be (without torch's import time):
    the console entry point (its SIGTERM handling), under a file-size limit (``ulimit -f``) when
    ``fsize`` is given, its stderr into the file ``stderr``, ``env`` added to its environment."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if stderr:
        os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    if env:
        os.environ.update(env)
        tempfile.tempdir = None  # $TMPDIR read again
    if fsize is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    from siamese.cli.root import main

    try:
        main(args)
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        os._exit(1)
    os._exit(0)


# -- driver side ------------------------------------------------------------------------------------------------


class Worker:
    def __init__(self):
        self.proc = None
        self.start()

    def start(self) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )

    def call(self, req: dict, timeout: float = 300) -> dict:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            line = self.proc.stdout.readline() if ready else None
        except BrokenPipeError:
            line = ""
        if line:
            return json.loads(line)
        if line is None:  # a hang
            self.proc.kill()
        rc = self.proc.wait()
        self.start()
        return {"rc": rc, "stdout": "", "stderr": "", "exception": "hang" if line is None else f"died (signal {-rc})"}

    def run(self, *args, timeout: float = 300) -> dict:
        return self.call({"op": "run", "args": [str(a) for a in args]}, timeout)


def one_line_error(r: dict) -> bool:
    lines = r["stderr"].strip().splitlines()
    return not r.get("exception") and r["rc"] == 2 and len(lines) == 1 and lines[0].startswith("error: ")


def clean_text(path: Path) -> bool:
    """Every file under ``path`` that a command writes as text is valid UTF-8 without NUL bytes."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []
    for f in files:
        if f.suffix not in (".csv", ".tsv", ".jsonl", ".json", ".txt"):
            continue
        data = f.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if b"\0" in data:
            return False
    return True


class Probe:
    def __init__(self, work: Path, data: Path, minutes: float):
        self.work, self.data = work, data
        self.rng = random.Random(36)
        self.results: dict[str, dict] = {}
        self.deadline_share = minutes * 60
        self.worker = Worker()
        self.zygote = Worker()

    def record(self, group: str, ok: bool, what: str) -> None:
        entry = self.results.setdefault(group, {"trials": 0, "failed": 0, "failures": []})
        entry["trials"] += 1
        if not ok:
            entry["failed"] += 1
            if len(entry["failures"]) < 25:
                entry["failures"].append(what[:400])

    def describe(self, args, r) -> str:
        shown = " ".join(str(a).replace(str(self.work), "W") for a in args)
        return f"{shown} -> rc {r['rc']} {r.get('exception') or r['stderr'].strip()[-200:]}"

    # -- set-up
    def setup(self) -> None:
        w, run = self.work, self.worker.run
        quora = (self.data / "quora/quora_question_pairs_sample300.csv").read_text(encoding="utf-8").splitlines()
        # ~900 pairs (~125 KB): a bad byte can sit far past the first 64 KiB
        rows = [quora[0]] + [f"{k}{r[r.index(',') :]}" for k in range(3) for r in quora[1:]]
        rows = [rows[0]] + [f"{i}{r[r.index(',') :]}" for i, r in enumerate(rows[1:])]
        self.pairs_text = "\n".join(rows) + "\n"
        (w / "pairs.csv").write_text(self.pairs_text)
        with open(self.data / "insuranceqa/questions.csv", encoding="utf-8") as f:
            import csv

            questions = list(dict.fromkeys(r["question"].strip() for r in csv.DictReader(f) if r["question"].strip()))
        self.questions = questions
        (w / "texts.txt").write_text("\n".join(questions[:300]) + "\n")
        (w / "add_a.txt").write_text("\n".join(questions[300:700]) + "\n")
        (w / "add_b.txt").write_text("\n".join(questions[700:1100]) + "\n")
        notes = ["text,note"] + [f'"{q}",n{i}' for i, q in enumerate(questions[:400])]
        (w / "notes.csv").write_text("\n".join(notes) + "\n")
        r = run(
            "train", "--data", w / "pairs.csv", "--encoder", "bow", "--epochs", "2", "--dim", "32", "--out", w / "M"
        )
        assert r["rc"] == 0, r
        r = run("index", "build", w / "M", "--data", w / "texts.txt", "--out", w / "IDX", "--quiet")
        assert r["rc"] == 0, r
        args = ("index", "build", w / "M", "--data", w / "texts.txt", "--kind", "ondisk", "--out", w / "OD", "--quiet")
        assert run(*args)["rc"] == 0
        assert run("dedupe", w / "M", "--data", w / "notes.csv", "--out", w / "RUN")["rc"] == 0
        args = ("train", "--data", w / "pairs.csv", "--encoder", "bow", "--epochs", "2", "--dim", "16")
        assert run(*args, "--out", w / "CKM", "--checkpoint", w / "CK")["rc"] == 0

    # -- 1. bad input files
    def pair_mutants(self):
        """(name, bytes) of damaged or odd pair files, the damage at a random place."""
        rng, base = self.rng, self.pairs_text.encode()
        lines = self.pairs_text.splitlines(keepends=True)

        def at(blob: bytes, insert: bytes) -> bytes:
            i = rng.randrange(len(blob) // 2, len(blob)) if rng.random() < 0.7 else rng.randrange(1, len(blob))
            return blob[:i] + insert + blob[i:]

        def row(fn) -> bytes:
            copy = list(lines)
            i = rng.randrange(1, len(copy))
            copy[i] = fn(copy[i])
            return "".join(copy).encode()

        return [
            ("nul", at(base, b"\0")),
            ("latin-1 byte", at(base, b"\xe9")),
            ("byte 0xff", at(base, b"\xff")),
            ("lone lead byte", at(base, b"\xc3")),
            ("continuation byte", at(base, b"\x80")),
            ("utf-8 surrogate", at(base, b"\xed\xa0\x80")),
            ("overlong", at(base, b"\xc0\xaf")),
            (
                "unbalanced quote",
                row(lambda s: ",".join(s.split(",")[:3] + ['"' + s.split(",")[3]] + s.split(",")[4:])),
            ),
            ("extra field", row(lambda s: s.rstrip("\n") + ",x\n")),
            ("missing field", row(lambda s: s.rsplit(",", 1)[0] + "\n")),
            ("bad label", row(lambda s: s.rsplit(",", 1)[0] + ",maybe\n")),
            ("empty text", row(lambda s: ",".join(s.split(",")[:3] + ['""'] + s.split(",")[4:]))),
            ("duplicate header", base.replace(b"question2", b"question1", 1)),
            ("empty", b""),
            ("header only", lines[0].encode()),
            ("utf-16 without bom", self.pairs_text.encode("utf-16-le")),
            ("random bytes", rng.randbytes(rng.randrange(10, 100_000))),
            ("truncated character", base + "é".encode()[:1]),
            ("tabs in a .csv", self.pairs_text.replace(",", "\t").encode()),
            ("crlf (valid)", self.pairs_text.replace("\n", "\r\n").encode()),
            ("utf-8 bom (valid)", b"\xef\xbb\xbf" + base),
            ("utf-16 with bom (valid)", self.pairs_text.encode("utf-16")),
            ("a 2 MB field", row(lambda s: ",".join(s.split(",")[:3] + ["word " * 400_000] + s.split(",")[4:]))),
        ]

    def text_mutants(self):
        rng = self.rng
        base = "\n".join(self.questions[:400]).encode() + b"\n"
        notes = (self.work / "notes.csv").read_bytes()

        def at(blob: bytes, insert: bytes) -> bytes:
            i = rng.randrange(len(blob) // 2, len(blob)) if rng.random() < 0.7 else rng.randrange(1, len(blob))
            return blob[:i] + insert + blob[i:]

        return [
            ("txt", "nul", at(base, b"\0")),
            ("txt", "latin-1 byte", at(base, b"\xe9")),
            ("txt", "byte 0xff", at(base, b"\xff")),
            ("txt", "utf-8 surrogate", at(base, b"\xed\xb0\x80")),
            ("txt", "empty", b""),
            ("txt", "blank lines only", b"\n \n\t\n"),
            ("txt", "random bytes", rng.randbytes(rng.randrange(10, 50_000))),
            ("txt", "utf-16 without bom", base.decode().encode("utf-16-le")),
            ("txt", "crlf (valid)", base.replace(b"\n", b"\r\n")),
            ("csv", "note column latin-1", notes.rstrip(b"\n") + b"\nwhat is life insurance,caf\xe9\n"),
            ("csv", "note column nul", at(notes, b"\0")),
            ("csv", "unbalanced quote", notes.replace(b'"', b"", 1)),
            ("csv", "duplicate header", b"text,text\na,b\n"),
            ("csv", "ragged row", notes.rstrip(b"\n") + b"\na,b,c\n"),
        ]

    def bad_inputs(self, limit: int, seconds: float) -> None:
        w, end = self.work, time.monotonic() + seconds
        n = 0
        while n < limit and time.monotonic() < end:
            for name, blob in self.pair_mutants():
                path = w / "bad" / "pairs.csv"
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(blob)
                shutil.copytree(w / "M", w / "MC", dirs_exist_ok=True)
                commands = [
                    ("evaluate", w / "M", "--data", path, "--format", "quora"),
                    (
                        "score",
                        w / "M",
                        "--data",
                        path,
                        "--out",
                        w / "bad" / "s.csv",
                        "--format",
                        "quora",
                        "--overwrite",
                    ),
                    ("calibrate", w / "MC", "--data", path, "--format", "quora"),
                ]
                if n % 4 == 0:  # training is the slowest: a quarter of the rounds
                    out = w / "bad" / "trained"
                    shutil.rmtree(out, ignore_errors=True)
                    commands.append(
                        (
                            "train",
                            "--data",
                            path,
                            "--format",
                            "quora",
                            "--encoder",
                            "bow",
                            "--epochs",
                            "1",
                            "--dim",
                            "8",
                            "--out",
                            out,
                        )
                    )
                for args in commands:
                    if n >= limit or time.monotonic() > end:
                        return
                    self._bad_input_trial(args, f"pairs {name}")
                    n += 1
            for kind, name, blob in self.text_mutants():
                path = w / "bad" / f"texts.{kind}"
                path.write_bytes(blob)
                commands = [
                    ("encode", w / "M", "--data", path, "--out", w / "bad" / "v.npy", "--quiet", "--overwrite"),
                    ("index", "build", w / "M", "--data", path, "--out", w / "bad" / "idx", "--quiet"),
                    ("dedupe", w / "M", "--data", path, "--out", w / "bad" / "run"),
                ]
                for args in commands:
                    if n >= limit or time.monotonic() > end:
                        return
                    self._bad_input_trial(args, f"{kind} {name}")
                    n += 1

    def _bad_input_trial(self, args, name: str) -> None:
        outs = [Path(a) for a, prev in zip(args[1:], args) if prev == "--out"]
        r = self.worker.run(*args)
        ok = one_line_error(r) or (r["rc"] == 0 and not r.get("exception") and all(clean_text(p) for p in outs))
        if ok and r["rc"] == 0:
            ok = "\0" not in r["stdout"] and all(ord(c) < 0xD800 or ord(c) > 0xDFFF for c in r["stdout"])
        self.record("bad inputs", ok, f"[{name}] " + self.describe(args, r))

    # -- 2. outputs aimed at inputs
    def outputs(self) -> None:
        w = self.work
        for name in ("M6", "T", "M20", "M27", "M28"):
            shutil.copytree(w / "M", w / name, dirs_exist_ok=True)
        shutil.copyfile(w / "pairs.csv", w / "M6" / "texts.jsonl")
        (w / "D").mkdir(exist_ok=True)
        shutil.copyfile(w / "pairs.csv", w / "D" / "pairs.csv")
        train = ("--encoder", "bow", "--epochs", "1", "--dim", "8")
        cases = [
            ("index", "build", "{M}", "--data", "{IDX}/texts.jsonl", "--out", "{IDX}"),
            ("train", "--data", "{M6}/texts.jsonl", "--format", "quora", "--out", "{M6}", *train),
            ("train", "--data", "{pairs}", "--loss", "distill", "--teacher", "{T}", "--out", "{T}", *train),
            ("index", "build", "{M20}", "--data", "{texts}", "--out", "{M20}", "--overwrite"),
            ("encode", "{M27}", "--data", "{texts}", "--out", "{M27}/model.safetensors", "--overwrite", "--quiet"),
            ("evaluate", "{M28}", "--data", "{pairs}", "--errors", "{M28}/tokenizer.json", "--overwrite"),
            ("evaluate", "{M28}", "--data", "{pairs}", "--report", "{M28}/config.json", "--overwrite"),
            ("evaluate", "{M}", "--data", "{pairs}", "--errors", "{pairs}", "--overwrite"),
            ("score", "{M}", "--data", "{pairs}", "--out", "{pairs}", "--overwrite"),
            ("score", "{M}", "--data", "{pairs}", "--out", "{M}/scores.csv"),
            ("encode", "{M}", "--data", "{texts}", "--out", "{texts}", "--overwrite", "--quiet"),
            ("encode", "{M}", "--data", "{texts}", "--out", "{M}/v.npy", "--quiet"),
            ("dedupe", "{M}", "--data", "{texts}", "--out", "{M}"),
            ("dedupe", "{M}", "--data", "{IDX}/texts.jsonl", "--out", "{IDX}"),
            ("dedupe", "{M}", "--data", "{texts}", "--out", "{M}/run"),
            ("index", "build", "{M}", "--data", "{texts}", "--out", "{M}", "--overwrite"),
            (
                "index",
                "build",
                "{M}",
                "--data",
                "{D}/pairs.csv",
                "--column",
                "question1",
                "--out",
                "{D}",
                "--overwrite",
            ),
            ("train", "--data", "{D}/pairs.csv", "--out", "{D}", "--overwrite", *train),
            ("train", "--data", "{pairs}", "--val-data", "{D}/pairs.csv", "--out", "{D}", "--overwrite", *train),
            ("train", "--data", "{pairs}", "--out", "{M20}", "--glove", "{M20}/config.json", "--overwrite", *train),
            ("export", "{M}", "--out", "{M}", "--overwrite"),
            ("export", "{M}", "--out", "{M}/onnx"),
            ("summary", "{M}", "--png", "{M}/arch.png"),
            ("pretrained", "{M}", "--out", "{M}", "--overwrite"),
        ]
        names = {"M", "M6", "T", "M20", "M27", "M28", "IDX", "D", "pairs", "texts"}
        paths = {n: w / (n + {"pairs": ".csv", "texts": ".txt"}.get(n, "")) for n in names}
        for case in cases:
            before = {n: _snapshot(p) for n, p in paths.items()}
            args = [a.format(**{k: str(v) for k, v in paths.items()}) for a in case]
            r = self.worker.run(*args)
            ok = one_line_error(r) and "this command reads" in r["stderr"]
            changed = [n for n, p in paths.items() if _snapshot(p) != before[n]]
            self.record("outputs replacing inputs", ok and not changed, self.describe(args, r) + f" changed {changed}")

    # -- 3. damaged folders
    def damaged(self, limit: int, seconds: float) -> None:
        w, end = self.work, time.monotonic() + seconds
        pristine = w / "pristine"
        for name in ("M", "IDX", "OD", "RUN", "CK"):
            shutil.copytree(w / name, pristine / name, symlinks=True, dirs_exist_ok=True)
        check = {
            "M": ("predict", w / "M", "what is life insurance", "is life insurance worth it"),
            "IDX": ("search", w / "IDX", "what is life insurance"),
            "OD": ("search", w / "OD", "what is life insurance"),
            "RUN": ("dedupe", w / "RUN", "--rethreshold", "0.9"),
            "CK": ("train", "--resume", w / "CK"),
        }
        trials = [d for _ in range(2) for d in damages(self.rng, w)][:limit]  # twice: other cuts, other junk
        for folder, name, damage in trials:
            if time.monotonic() > end:
                break
            target = w / folder / name
            _damage(target, damage, w / "M" / "model.safetensors", self.rng)
            r = self.worker.run(*check[folder])
            benign = (folder, name) == ("RUN", "clusters.jsonl")  # rewritten by --rethreshold, never read
            ok = one_line_error(r) or (benign and r["rc"] == 0 and not r.get("exception"))
            shown = damage if not callable(damage) and not isinstance(damage, bytes) else type(damage).__name__
            what = f"{folder}/{name} {shown}"
            self.record("damaged folders", ok, f"[{what}] " + self.describe(check[folder], r))
            shutil.rmtree(w / folder)
            shutil.copytree(pristine / folder, w / folder, symlinks=True)
            if folder == "CK":
                shutil.rmtree(w / "CKM", ignore_errors=True)

    # -- 4. kill -9 in the middle of a write, then the next command on the target
    def kills(self, limit: int, seconds: float) -> None:
        w, end = self.work, time.monotonic() + seconds
        q = "what is life insurance"
        scenarios = [  # (command, target, the next command on it)
            (
                ("index", "build", w / "M", "--data", w / "add_a.txt", "--out", w / "IDX", "--quiet"),
                w / "IDX",
                ("search", w / "IDX", q),
            ),
            (("index", "add", w / "IDX", "--data", w / "add_b.txt", "--quiet"), w / "IDX", ("search", w / "IDX", q)),
            (
                ("dedupe", w / "M", "--data", w / "notes.csv", "--out", w / "RUN"),
                w / "RUN",
                ("dedupe", w / "RUN", "--rethreshold", "0.85"),
            ),
            (("dedupe", w / "RUN", "--rethreshold", "0.8"), w / "RUN", ("dedupe", w / "RUN", "--rethreshold", "0.85")),
            (
                (
                    "train",
                    "--data",
                    w / "pairs.csv",
                    "--encoder",
                    "bow",
                    "--epochs",
                    "1",
                    "--dim",
                    "16",
                    "--out",
                    w / "M2",
                ),
                w / "M2",
                ("predict", w / "M2", q, q),
            ),
            (
                ("score", w / "M", "--data", w / "pairs.csv", "--out", w / "s.csv", "--overwrite", "--quiet"),
                w / "s.csv",
                ("score", w / "M", "--data", w / "pairs.csv", "--out", w / "s.csv", "--overwrite", "--quiet"),
            ),
            (
                ("encode", w / "M", "--data", w / "texts.txt", "--out", w / "v.npy", "--overwrite", "--quiet"),
                w / "v.npy",
                ("encode", w / "M", "--data", w / "texts.txt", "--out", w / "v.npy", "--overwrite", "--quiet"),
            ),
        ]
        durations = {}
        for command, _, _ in scenarios:  # each once unkilled: the target exists, and how long it takes
            t = time.monotonic()
            pid = self.zygote.call({"op": "fork", "args": [str(a) for a in command]})["pid"]
            self.zygote.call({"op": "wait", "pid": pid})
            durations[command] = max(0.2, time.monotonic() - t)
        n = 0
        while n < limit and time.monotonic() < end:
            command, target, after = scenarios[n % len(scenarios)]
            pid = self.zygote.call({"op": "fork", "args": [str(a) for a in command]})["pid"]
            time.sleep(self.rng.uniform(0, durations[command] * 1.1))
            with_signal = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                with_signal = False
            self.zygote.call({"op": "wait", "pid": pid})
            r = self.worker.run(*after)
            left = sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))
            ok = r["rc"] == 0 and not r.get("exception") and not left
            late = "" if with_signal else " (too late)"
            what = f"kill{late} of {command[0]} {command[1] if command[0] == 'index' else ''}"
            self.record("kills", ok, f"[{what}] next: " + self.describe(after, r) + f" left {left}")
            self.results["kills"]["signalled mid-command"] = (
                self.results["kills"].get("signalled mid-command", 0) + with_signal
            )
            n += 1

    # -- 5. concurrent writers
    def concurrency(self, limit: int, seconds: float) -> None:
        w, end = self.work, time.monotonic() + seconds
        expected = set(self.questions[:1100])
        for trial in range(limit):
            if time.monotonic() > end:
                break
            if trial % 3 == 2:  # three trainings saving to one model folder at once
                commands = [
                    (
                        "train",
                        "--data",
                        w / "pairs.csv",
                        "--encoder",
                        "bow",
                        "--epochs",
                        "1",
                        "--dim",
                        "8",
                        "--seed",
                        str(s),
                        "--out",
                        w / "M3",
                    )
                    for s in range(3)
                ]
                statuses = self._together(commands)
                r = self.worker.run("predict", w / "M3", "a b", "a c")
                left = [p.name for p in w.iterdir() if p.name.startswith(".M3.")]
                ok = all(s == 0 for s in statuses) and r["rc"] == 0 and not left
                self.record(
                    "concurrency", ok, f"3 trainings into one folder: rc {statuses}, predict rc {r['rc']}, left {left}"
                )
                continue
            shutil.rmtree(w / "IDX2", ignore_errors=True)
            assert (
                self.worker.run("index", "build", w / "M", "--data", w / "texts.txt", "--out", w / "IDX2", "--quiet")[
                    "rc"
                ]
                == 0
            )
            adds = [
                ("index", "add", w / "IDX2", "--data", w / n, "--quiet")
                for n in (("add_a.txt", "add_b.txt") if trial % 2 else ("add_b.txt", "add_a.txt"))
            ]
            statuses = self._together(adds)
            texts = [json.loads(line)["text"] for line in (w / "IDX2" / "texts.jsonl").read_text().splitlines()]
            ok = all(s == 0 for s in statuses) and set(texts) == expected and len(texts) == 1100
            self.record("concurrency", ok, f"two index adds: rc {statuses}, {len(texts)} texts (want 1,100)")

    # -- round three: set-up
    def setup_round_three(self) -> None:
        """What the round-three groups need: a corpus with an oracle column, a saved transformer
        model and a Hugging Face folder to tamper with, and every writer's output once, whole."""
        w = self.work
        import csv

        with open(w / "topics.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "topic"])
            writer.writerows([q, q.split()[0].lower()] for q in self.questions[:120])
        self.scratch = w / "tmp"  # the commands' $TMPDIR: an on-disk build's scratch goes there
        self.scratch.mkdir()
        code = (
            "import sys, shutil; from siamese import ModelConfig, SiameseModel\n"
            "from siamese.models.pretrained import default_model_path\n"
            "SiameseModel.build([], ModelConfig(encoder='transformer', max_length=32)).save(sys.argv[1])\n"
            "shutil.copytree(default_model_path(), sys.argv[2])\n"
        )
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        subprocess.run([sys.executable, "-c", code, str(w / "TM"), str(w / "HF")], check=True, env=env)
        self.base = w / "base"  # every writer's output, written whole: each trial starts from a copy
        self.base.mkdir()
        shutil.copytree(w / "IDX", self.base / "IDX")
        shutil.copytree(w / "M", self.base / "M")
        for _, command, _, _ in self.write_scenarios(self.base):
            if command[0] not in ("index",) or command[1] != "add":
                r = self.worker.run(*command)
                assert r["rc"] == 0, (command, r)

    def write_scenarios(self, where: Path) -> list[tuple]:
        """(name, command, target, the next command on the target) for each writer, outputs in ``where``."""
        w, q = self.work, "what is life insurance"
        return [
            ("index add", ("index", "add", where / "IDX", "--data", w / "add_a.txt", "--quiet"), "IDX", ("search", q)),
            (
                "index build",
                (
                    "index",
                    "build",
                    w / "M",
                    "--data",
                    w / "add_b.txt",
                    "--out",
                    where / "IDX",
                    "--overwrite",
                    "--quiet",
                ),
                "IDX",
                ("search", q),
            ),
            (
                "ondisk build",
                ("index", "build", w / "M", "--data", w / "add_a.txt", "--kind", "ondisk", "--out", where / "OD")
                + ("--overwrite", "--quiet"),
                "OD",
                ("search", q),
            ),
            (
                "train",
                ("train", "--data", w / "pairs.csv", "--encoder", "bow", "--epochs", "1", "--dim", "16")
                + ("--out", where / "M", "--overwrite"),
                "M",
                ("predict", q, q),
            ),
            ("calibrate", ("calibrate", where / "M", "--data", w / "pairs.csv"), "M", ("predict", q, q)),
            (
                "score",
                ("score", w / "M", "--data", w / "pairs.csv", "--out", where / "s.csv", "--overwrite", "--quiet"),
                "s.csv",
                None,
            ),
            (
                "encode",
                ("encode", w / "M", "--data", w / "texts.txt", "--out", where / "v.npy", "--overwrite", "--quiet"),
                "v.npy",
                None,
            ),
            (
                "dedupe",
                ("dedupe", w / "M", "--data", w / "notes.csv", "--out", where / "RUN"),
                "RUN",
                ("--rethreshold",),
            ),
            (
                "label",
                ("label", w / "M", "--data", w / "topics.csv", "--column", "text", "--out", where / "labels.csv")
                + ("--oracle-column", "topic", "--budget", str(self.rng.randrange(20, 60)), "-k", "3"),
                "labels.csv",
                None,
            ),
        ]

    def _next_ok(self, target: Path, after) -> bool:
        """The target reads after the command: the next command on it works, or its file is whole."""
        if target.name == "labels.csv":
            return _labels_whole(target)
        if after is None:
            return target.is_file() and target.stat().st_size > 0
        if after == ("--rethreshold",):
            args = ("dedupe", target, "--rethreshold", "0.9")
        else:
            args = (after[0], target, *after[1:])
        r = self.worker.run(*args)
        return r["rc"] == 0 and not r.get("exception")

    def _left(self, target: Path) -> list[str]:
        beside = [p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]
        return beside + [p.name for p in self.scratch.glob("siamese-*")]

    # -- 6. writes that fail: a file-size limit, then a full disk
    def failing_writes(self, group: str, limit: int, seconds: float, disk: Path | None) -> None:
        """Each writer under a file-size limit (``disk`` None: RLIMIT_FSIZE in its process, EFBIG) or
        with its output on a small tmpfs filled to a random room (ENOSPC). Clean: it worked and the
        target reads, or a one-line error naming what it could not write, the old target unchanged
        (the labels file: whole rows); nothing left beside it or in $TMPDIR."""
        w, end, n = self.work, time.monotonic() + seconds, 0
        where = disk if disk is not None else w / "fsize"
        where.mkdir(exist_ok=True)
        while n < limit and time.monotonic() < end:
            name, command, target_name, after = self.rng.choice(self.write_scenarios(where))
            target = where / target_name
            for p in list(where.iterdir()):  # a fresh copy of the whole outputs
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            if (self.base / target_name).is_dir():
                shutil.copytree(self.base / target_name, target, symlinks=True)
            else:
                shutil.copyfile(self.base / target_name, target)
            before = _snapshot(target)
            room = int(10 ** self.rng.uniform(3, 5.7))  # 1 KB .. 500 KB
            if disk is not None:
                _fill(disk, room)
            stderr = w / "stderr.txt"
            request = {"op": "fork", "args": [str(a) for a in command], "stderr": str(stderr)}
            request["env"] = {"TMPDIR": str(self.scratch)}
            if disk is None:
                request["fsize"] = room
            pid = self.zygote.call(request)["pid"]
            status = self.zygote.call({"op": "wait", "pid": pid})["status"]
            (where / ".filler").unlink(missing_ok=True)
            err = stderr.read_text(errors="replace")
            last = err.strip().splitlines()[-1] if err.strip() else ""
            left = self._left(target)
            if status == 0:
                ok = self._next_ok(target, after)
            elif status == 2:
                named = last.startswith("error: ") and ("cannot write" in last or "not saved" in last)
                kept = _labels_whole(target) if name == "label" else _snapshot(target) == before
                ok = named and kept and (name == "label" or self._next_ok(target, after))
            else:
                ok = False
            ok = ok and not left and "Traceback" not in err
            self.record(group, ok, f"[{name}, {room:,} bytes] rc {status}: {last[-200:]} left {left}")
            self.results[group]["refused (the write failed)"] = self.results[group].get(
                "refused (the write failed)", 0
            ) + (status == 2)
            n += 1

    # -- 7. SIGTERM mid-write, then the next command on the target
    def sigterms(self, limit: int, seconds: float) -> None:
        """SIGTERM at a random moment of each writer: it exits 143 (or 0 when done), having removed its
        temporary files, lock and $TMPDIR scratch; the next command on the target works."""
        w, end, n = self.work, time.monotonic() + seconds, 0
        where = w / "term"
        where.mkdir()
        scenarios = self.write_scenarios(where)
        for _, _, target_name, _ in scenarios:
            if not (where / target_name).exists():
                copy = shutil.copytree if (self.base / target_name).is_dir() else shutil.copyfile
                copy(self.base / target_name, where / target_name)
        durations = {}
        for name, command, _, _ in scenarios:
            t = time.monotonic()
            pid = self.zygote.call({"op": "fork", "args": [str(a) for a in command]})["pid"]
            self.zygote.call({"op": "wait", "pid": pid})
            durations[name] = max(0.3, time.monotonic() - t)
        while n < limit and time.monotonic() < end:
            name, command, target_name, after = scenarios[n % len(scenarios)]
            target = where / target_name
            stderr = w / "stderr.txt"
            request = {"op": "fork", "args": [str(a) for a in command], "stderr": str(stderr)}
            pid = self.zygote.call({**request, "env": {"TMPDIR": str(self.scratch)}})["pid"]
            time.sleep(self.rng.uniform(0.1, 1.1) * durations[name])
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            status = self.zygote.call({"op": "wait", "pid": pid})["status"]
            err = stderr.read_text(errors="replace")
            left = self._left(target)
            # -SIGTERM: the signal came in the interpreter's last steps, the command done
            ok = status in (0, 128 + signal.SIGTERM, -signal.SIGTERM) and "Traceback" not in err and not left
            ok = ok and self._next_ok(target, after)
            self.record("SIGTERM", ok, f"[{name}] rc {status} {err.strip()[-150:]} left {left}")
            self.results["SIGTERM"]["stopped mid-command"] = self.results["SIGTERM"].get("stopped mid-command", 0) + (
                "stopped by SIGTERM" in err
            )
            n += 1

    # -- 8. the labelling page and the service against other sites
    def _server(self, *args) -> tuple[subprocess.Popen, str]:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TMPDIR": str(self.scratch)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "siamese", *map(str, args), "--port", str(port), "--log-level", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while _http(base, "/health")[0] != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{args[0]} did not start")
            time.sleep(0.3)
        return proc, base

    def hosts(self, limit: int, seconds: float) -> None:
        """Requests naming another site in Host (DNS rebinding) are refused (421) by ``serve`` without
        keys and by ``label``, before anything is read or written, as is a Host whose port is not a number;
        the server's own names and any IP address are answered; label's /api/ without the page's token is 403."""
        w, end, n = self.work, time.monotonic() + seconds, 0
        serve, serve_base = self._server("serve", w / "M", "--index", w / "IDX")
        labels = w / "hosts-labels.csv"
        label, label_base = self._server(
            "label", w / "M", "--data", w / "topics.csv", "--column", "text", "--out", labels
        )
        try:
            token = _page_token(label_base)
            port = serve_base.rsplit(":", 1)[1]
            good = ["127.0.0.1", f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}", f"[::1]:{port}", "10.0.0.7:80"]
            good += ["app.localhost", "[fe80::1]"]
            bad = ["evil.example", f"evil.example:{port}", "localhost.evil.example", "127.0.0.1.nip.io"]
            bad += [f"attacker.test:{port}", "xn--80ak6aa92e.com", "EVIL.EXAMPLE", "a.b.c.d.e"]
            bad += ["localhost:abc", f"127.0.0.1:{port}x", "localhost:"]  # a port that is not one
            search = {"query": "what is life insurance", "k": 3}
            while n < limit and time.monotonic() < end:
                host = self.rng.choice(good + bad)
                want = 200 if host in good else 421
                which = self.rng.randrange(5)
                if which == 0:
                    status, body = _http(serve_base, "/search", search, {"Host": host})
                    ok = status == want and (want == 421) != ("hits" in body)
                elif which == 1:
                    status, _ = _http(serve_base, "/health", None, {"Host": host})
                    ok = status == want
                elif which == 2:
                    status, _ = _http(label_base, "/", None, {"Host": host})
                    ok = status == want
                elif which == 3:
                    status, body = _http(label_base, f"/api/next?tab=h{n}", None, {"Host": host, **token})
                    ok = status == want and (want == 421) != ("pair" in body)
                else:  # an answer: recorded only when both the name and the token are right
                    before = _labels_count(labels)
                    with_token = self.rng.random() < 0.7
                    headers = {"Host": host, **(token if with_token else {"X-Siamese-Token": "guess"})}
                    shown = _http(label_base, "/api/next?tab=probe", None, token)[1].get("pair")
                    if shown is None:
                        break
                    status, body = _http(
                        label_base, "/api/answer", {"index": shown["index"], "label": "n", "tab": "probe"}, headers
                    )
                    want = want if with_token or want == 421 else 403
                    ok = status == want and _labels_count(labels) == before + (want == 200)
                self.record("Host header", ok, f"Host {host!r} case {which}: {status} (want {want})")
                n += 1
        finally:
            for proc in (serve, label):
                proc.kill()
                proc.wait()

    def reservations(self, limit: int, seconds: float) -> None:
        """A flood of GET /api/next under new tab names (a page of another site: no token; a buggy
        page: with it) never leaves the person's tab without a pair; a tab's Undo takes back its own
        answer only."""
        w, end, n = self.work, time.monotonic() + seconds, 0
        labels = w / "queue-labels.csv"
        proc, base = self._server(
            "label", w / "M", "--data", w / "topics.csv", "--column", "text", "--out", labels, "-k", "3"
        )
        try:
            token = _page_token(base)
            pairs = _http(base, "/health")[1]["pairs"]
            while n < limit and time.monotonic() < end:
                if n % 3 == 2:  # two tabs answer; each undoes its own
                    a = _http(base, "/api/next?tab=a", None, token)[1]["pair"]
                    b = _http(base, "/api/next?tab=b", None, token)[1]["pair"]
                    if a is None or b is None:
                        break
                    _http(base, "/api/answer", {"index": a["index"], "label": "d", "tab": "a"}, token)
                    _http(base, "/api/answer", {"index": b["index"], "label": "n", "tab": "b"}, token)
                    status, undone = _http(base, "/api/undo", {"tab": "a"}, token)
                    rows = [(r[0], r[1]) for r in _labels_rows(labels)]
                    ok = status == 200 and undone["pair"]["index"] == a["index"]
                    ok = ok and (b["text1"], b["text2"]) in rows and (a["text1"], a["text2"]) not in rows
                    self.record("queue reservation", ok, f"undo in tab a (b answered last): {status}")
                    _http(base, "/api/answer", {"index": a["index"], "label": "d", "tab": "a"}, token)
                    n += 1
                    continue
                flood = pairs + 20
                with_token = n % 3 == 1
                for i in range(flood):
                    _http(base, f"/api/next?tab=flood{n}-{i}", None, token if with_token else {})
                status, mine = _http(base, "/api/next?tab=person", None, token)
                pair = mine.get("pair") if status == 200 else None
                ok = pair is not None
                if ok:
                    s2, done = _http(
                        base, "/api/answer", {"index": pair["index"], "label": "n", "tab": "person"}, token
                    )
                    ok = s2 == 200 and done.get("saved") is True
                what = f"{flood} GETs of new tabs {'with' if with_token else 'without'} the token"
                self.record("queue reservation", ok, f"{what}: the person's tab got {status} {pair is not None}")
                n += 1
        finally:
            proc.kill()
            proc.wait()

    # -- 9. files as people leave them: CR-only line ends, no final line end, a row cut short
    def line_ends(self, limit: int, seconds: float) -> None:
        """Input files with CR-only line ends or without a final line end read as the same rows;
        labels files so (and header-only, CRLF, a last row cut short) resume without losing a row;
        a NUL byte in a labels file is a one-line error."""
        w, end, n = self.work, time.monotonic() + seconds, 0
        d = w / "ends"
        d.mkdir()
        pairs_lines = self.pairs_text.splitlines()[:300]
        texts = self.questions[:300]
        header = "text1,text2,label,id1,id2,similarity,time"
        labels_variants = [
            ("cr only", header + "\ra,b,1,,,0.5,t\rc,d,0,,,,t\r", 2),
            ("no final line end", header + "\na,b,1,,,0.5,t\nc,d,0,,,,t", 2),
            ("header only, no line end", header, 0),
            ("crlf", header + "\r\na,b,1,,,0.5,t\r\n", 1),
            ("row cut short", header + '\na,b,1,,,0.5,t\n"how do i reset my pass', 1),
            ("row cut short, no quote", header + "\na,b,1,,,0.5,t\nc,d,1,,", 1),
        ]
        while n < limit and time.monotonic() < end:
            kind = n % 4
            ending = self.rng.choice(["\r", "\n", "\r\n"])
            final = self.rng.random() < 0.5
            if kind == 0:  # pairs
                path = d / "pairs.csv"
                path.write_text(ending.join(pairs_lines) + (ending if final else ""), newline="")
                args = self.rng.choice(
                    [
                        ("evaluate", w / "M", "--data", path, "--format", "quora", "--json"),
                        ("score", w / "M", "--data", path, "--out", d / "s.csv", "--overwrite", "--format", "quora"),
                    ]
                )
                r = self.worker.run(*args)
                if args[0] == "evaluate":
                    ok = r["rc"] == 0 and json.loads(r["stdout"])["n"] == len(pairs_lines) - 1
                else:
                    ok = r["rc"] == 0 and len((d / "s.csv").read_text().splitlines()) == len(pairs_lines)
            elif kind == 1:  # texts
                path = d / "texts.txt"
                path.write_text(ending.join(texts) + (ending if final else ""), newline="")
                r = self.worker.run("encode", w / "M", "--data", path, "--out", d / "v.npy", "--overwrite", "--json")
                ok = r["rc"] == 0 and json.loads(r["stdout"])["n"] == len(texts)
            elif kind == 2:  # a labels file, resumed by a replay
                name, content, rows = labels_variants[(n // 4) % len(labels_variants)]
                path = d / "labels.csv"
                path.write_text(content, newline="")
                (d / "labels.torn.txt").unlink(missing_ok=True)
                r = self.worker.run(
                    *("label", w / "M", "--data", w / "topics.csv", "--column", "text", "--out", path),
                    *("--oracle-column", "topic", "--budget", str(rows + 5), "-k", "3"),
                )
                kept = _labels_rows(path)
                ok = r["rc"] == 0 and _labels_whole(path) and len(kept) == rows + 5
                ok = ok and [k[0] for k in kept[:rows]] == (["a", "c"][:rows] if rows else [])
                if "cut short" in name:
                    ok = ok and (d / "labels.torn.txt").is_file()
            else:  # a NUL byte in a labels file
                path = d / "labels.csv"
                path.write_bytes((header + "\na,b,1,,,,t\nc\0,d,0,,,,t\n").encode())
                r = self.worker.run("label", w / "M", "--data", w / "topics.csv", "--column", "text", "--out", path)
                ok = one_line_error(r) and "NUL" in r["stderr"]
            self.record(
                "CR-only and no-final-newline files",
                ok,
                f"[case {kind}, {ending!r}, final {final}] " + self.describe(("...",), r),
            )
            n += 1

    # -- 10. transformer configs asking for the impossible
    def transformer_configs(self, limit: int, seconds: float) -> None:
        """A saved transformer's hf_config, or a Hugging Face folder's config.json, with sizes no
        weights file can back: a one-line error before anything is allocated."""
        w, end, n = self.work, time.monotonic() + seconds, 0
        config_file = w / "TM" / "config.json"
        pristine = config_file.read_text()
        hf_file = w / "HF" / "config.json"
        hf_pristine = hf_file.read_text()
        keys = ["vocab_size", "hidden_size", "intermediate_size", "max_position_embeddings", "type_vocab_size"]
        keys += ["num_hidden_layers", "num_attention_heads"]
        values = [10**9, 10**12, 10**18, 2**63, -1, 0, "x", 2.5, None, [1], True, 7, 385, 10**6]
        attacks = [(k, v) for k in keys for v in values if not (v is None and k == "type_vocab_size")]
        self.rng.shuffle(attacks)
        for key, value in attacks:
            if n >= limit or time.monotonic() > end:
                break
            on_hf = n % 4 == 3
            target = hf_file if on_hf else config_file
            raw = json.loads(hf_pristine if on_hf else pristine)
            (raw if on_hf else raw["encoder_options"]["hf_config"])[key] = value
            target.write_text(json.dumps(raw))
            started = time.monotonic()
            if on_hf:
                args = ("train", "--data", w / "pairs.csv", "--encoder", "transformer", "--transformer", w / "HF")
                args += ("--epochs", "1", "--out", w / "TT")
            else:
                args = ("predict", w / "TM", "what is life insurance", "is life insurance worth it")
            r = self.worker.run(*args, timeout=120)
            took = time.monotonic() - started
            ok = one_line_error(r) and took < 60
            self.record(
                "huge transformer configs",
                ok,
                f"[{'HF folder' if on_hf else 'model'} {key}={value!r}, {took:.1f} s] " + self.describe(args, r),
            )
            target.write_text(hf_pristine if on_hf else pristine)
            n += 1

    def _together(self, commands) -> list[int]:
        pids = [self.zygote.call({"op": "fork", "args": [str(a) for a in c]})["pid"] for c in commands]
        return [self.zygote.call({"op": "wait", "pid": pid})["status"] for pid in pids]


def _fill(disk: Path, room: int) -> None:
    """Fill the tmpfs ``disk`` so that only ``room`` bytes (to a page) stay free."""
    filler = disk / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - room))


def _mount_tmpfs(folder: Path, size_kb: int) -> bool:
    """A small tmpfs at ``folder``: a real full disk (needs root; False where it cannot be mounted)."""
    folder.mkdir(exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)], capture_output=True)
    return done.returncode == 0


def _labels_rows(path: Path) -> list[list[str]]:
    import csv

    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [row for row in list(csv.reader(f))[1:] if row]


def _labels_count(path: Path) -> int:
    return len(_labels_rows(path))


def _labels_whole(path: Path) -> bool:
    """A labels file whose every row is whole (7 fields, a 0/1 label) and which ends a line."""
    import csv

    if not path.is_file():
        return False
    data = path.read_bytes()
    if data and not data.endswith((b"\n", b"\r")):
        return False
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f, strict=True))
    except (csv.Error, UnicodeDecodeError):
        return False
    return all(len(r) == 7 and r[2] in ("0", "1") for r in rows[1:] if r)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(base: str, path: str, body=None, headers: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, json.loads(raw) if "json" in r.headers.get("content-type", "") else {"body": len(raw)}
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {}
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}


def _page_token(base: str) -> dict:
    page = urllib.request.urlopen(base + "/", timeout=30).read().decode()
    return {"X-Siamese-Token": re.search(r'<meta name="siamese-token" content="([^"]+)">', page).group(1)}


def _snapshot(path: Path) -> dict:
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _cut(path: Path, fraction: float) -> None:
    os.truncate(path, int(path.stat().st_size * fraction))


def _edit_json(path: Path, fn) -> None:
    raw = json.loads(path.read_text())
    path.write_text(json.dumps(fn(raw)))


def _set(key: str, value):
    return lambda raw: {**raw, key: value}


def _set_trainer(key: str, value):
    return lambda raw: {**raw, "trainer": {**raw["trainer"], key: value}}


def damages(rng: random.Random, work: Path) -> list[tuple[str, str, object]]:
    """(folder, file, damage): a damage is a fraction to truncate to, bytes to write, None (delete),
    a callable editing the JSON, or "symlink"."""
    junk = lambda: rng.randbytes(rng.randrange(1, 200_000))  # noqa: E731
    out = []
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        out += [("M", name, None), ("M", name, 0.0), ("M", name, rng.uniform(0.05, 0.95)), ("M", name, junk())]
    config_edits = [
        ("dim", 10**12),
        ("dim", -1),
        ("dim", "x"),
        ("vocab_size", 10**15),
        ("encoder", "nope"),
        ("head", 3),
        ("threshold", None),
        ("threshold", float("nan")),
        ("lowercase", "yes"),
        ("encoder_options", [1]),
        ("oov_buckets", -5),
        ("format", "siamese-model/99"),
        ("max_length", 0),
        ("char_buckets", 10**13),
    ]
    out += [("M", "config.json", _set(k, v)) for k, v in config_edits]
    for name in ("index.faiss", "texts.jsonl", "index.json"):
        out += [("IDX", name, None), ("IDX", name, 0.0), ("IDX", name, rng.uniform(0.05, 0.95)), ("IDX", name, junk())]
    index_edits = [
        ("dim", 7),
        ("size", 10),
        ("size", "n"),
        ("kind", "hnsw"),
        ("kind", "annoy"),
        ("nprobe", 0),
        ("model_fingerprint", "x" * 64),
        ("model_path", str(work / "nowhere")),
        ("threshold", "high"),
    ]
    out += [("IDX", "index.json", _set(k, v)) for k, v in index_edits]
    for fraction in (0.0, 0.1, 0.5, 0.9, 0.99, 0.999):
        out.append(("OD", "lists.ivfdata", fraction))
    out += [("OD", "lists.ivfdata", None), ("OD", "lists.ivfdata", "symlink"), ("OD", "index.faiss", 0.5)]
    out += [("OD", "lists.ivfdata", "random") for _ in range(4)]
    out += [("OD", "index.json", _set(k, v)) for k, v in [("lists_bytes", 5), ("lists_sha256", "0" * 64), ("dim", 7)]]
    for name in ("run.json", "records.jsonl", "pairs.npz", "result.json", "clusters.jsonl", "vectors.npy"):
        out += [("RUN", name, None), ("RUN", name, 0.0), ("RUN", name, rng.uniform(0.05, 0.95)), ("RUN", name, junk())]
    out += [("RUN", "run.json", _set(k, v)) for k, v in [("floor", "x"), ("mode", "other"), ("k", -1), ("format", 1)]]
    out += [("RUN", "result.json", _set(k, v)) for k, v in [("threshold", "x"), ("min_size", 0), ("clustering", 5)]]
    for name in ("trainer_state.json", "trainer_state.safetensors"):
        out += [("CK", name, None), ("CK", name, 0.0), ("CK", name, rng.uniform(0.05, 0.95)), ("CK", name, junk())]
    out += [
        ("CK", "trainer_state.json", fn)
        for fn in (
            lambda raw: [],
            _set("meta", "x"),
            _set("meta", []),
            _set("trainer", []),
            _set("trainer", None),
            _set("meta", {"run": []}),
            _set("meta", {"run": {"cli": {"data": 3}}}),
            _set("meta", {"train_config": []}),
            _set_trainer("epoch", "2"),
            _set_trainer("epochs", -1),
            _set_trainer("optimizers", {}),
            _set_trainer("weights", {"tensor": "absent"}),
            _set_trainer("numpy_rng", {"state": 1}),
            _set_trainer("fitted", []),
            _set_trainer("torch_rng", 5),
        )
    ]
    return out


def _damage(target: Path, damage, other: Path, rng: random.Random) -> None:
    if damage is None:
        target.unlink()
    elif damage == "symlink":
        target.unlink()
        target.symlink_to(other)
    elif damage == "random":
        target.write_bytes(rng.randbytes(target.stat().st_size))
    elif isinstance(damage, float):
        _cut(target, damage)
    elif isinstance(damage, bytes):
        target.write_bytes(damage)
    else:
        _edit_json(target, damage)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--minutes", type=float, default=10.0, help="Wall-time budget of the whole probe.")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "robustness.json")
    parser.add_argument("--only", nargs="+", metavar="GROUP", help="Run only these groups (names as in the table).")
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("SIAMESE_DATA", REPO.parent / "shared" / "data"))
    )
    args = parser.parse_args()
    if args.worker:
        return worker_main()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="probe-"))
    budget = args.minutes * 60
    probe = Probe(work, args.data, args.minutes)
    disk = work / "disk"
    mounted = _mount_tmpfs(disk, 4096)
    try:
        probe.setup()
        probe.setup_round_three()
        groups = [
            ("outputs replacing inputs", lambda: probe.outputs()),
            ("concurrency", lambda: probe.concurrency(12, 0.1 * budget)),
            ("damaged folders", lambda: probe.damaged(211, 0.08 * budget)),
            ("bad inputs", lambda: probe.bad_inputs(410, 0.1 * budget)),
            ("file-size limit", lambda: probe.failing_writes("file-size limit", 90, 0.1 * budget, None)),
            ("full disk", lambda: mounted and probe.failing_writes("full disk", 90, 0.1 * budget, disk)),
            ("Host header", lambda: probe.hosts(300, 0.05 * budget)),
            ("queue reservation", lambda: probe.reservations(12, 0.06 * budget)),
            ("CR-only and no-final-newline files", lambda: probe.line_ends(80, 0.05 * budget)),
            ("huge transformer configs", lambda: probe.transformer_configs(76, 0.08 * budget)),
            ("SIGTERM", lambda: probe.sigterms(72, 0.1 * budget)),
            ("kills", lambda: probe.kills(148, max(60.0, budget - (time.monotonic() - started)))),
        ]
        for name, run_group in groups:
            if not args.only or name in args.only:
                run_group()
    finally:
        for w in (probe.worker, probe.zygote):
            w.proc.kill()
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    rows = ["bad inputs", "kills", "damaged folders", "concurrency", "outputs replacing inputs"]
    rows += ["file-size limit", "full disk", "SIGTERM", "Host header", "queue reservation"]
    rows += ["CR-only and no-final-newline files", "huge transformer configs"]
    rows = [r for r in rows if not args.only or r in args.only]
    result = {
        "command": "python bench/probe.py --minutes "
        + f"{args.minutes:g}"
        + (f" --only {args.only}" if args.only else ""),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip(),
        "seconds": round(time.monotonic() - started),
        # a real full disk (a small tmpfs, mounted where this process may: root), else not probed
        "full disk": "a 4 MiB tmpfs filled to a random room" if mounted else "not probed (no tmpfs mount: not root)",
        "groups": {k: probe.results.get(k, {"trials": 0, "failed": 0, "failures": []}) for k in rows},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"{'probe':36s} {'trials':>6s} {'failed':>6s}")
    for k in rows:
        g = result["groups"][k]
        print(f"{k:36s} {g['trials']:6d} {g['failed']:6d}")
        for f in g["failures"][:5]:
            print("    " + f)
    print(f"({result['seconds']} s; details in {args.out})")


if __name__ == "__main__":
    main()
