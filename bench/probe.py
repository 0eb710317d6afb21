"""The hostile probe, in one command: bad input files, kill -9 mid-write, damaged
folders, concurrent writers and outputs aimed at inputs, against the ``siamese`` commands.

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
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
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
                _child(req["args"])
            proto.write(json.dumps({"pid": pid}) + "\n")
        elif req["op"] == "wait":
            _, status = os.waitpid(req["pid"], 0)
            proto.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")


def _child(args: list[str]) -> None:
    """A forked command: its own process, as `siamese ARGS` would be (without torch's import time)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    from siamese.cli import app

    try:
        app(args, prog_name="siamese")
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

    def _together(self, commands) -> list[int]:
        pids = [self.zygote.call({"op": "fork", "args": [str(a) for a in c]})["pid"] for c in commands]
        return [self.zygote.call({"op": "wait", "pid": pid})["status"] for pid in pids]


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
    try:
        probe.setup()
        probe.outputs()
        probe.concurrency(12, 0.3 * budget)
        probe.damaged(211, 0.2 * budget)
        probe.bad_inputs(410, 0.25 * budget)
        probe.kills(148, max(60.0, budget - (time.monotonic() - started)))
    finally:
        for w in (probe.worker, probe.zygote):
            w.proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    rows = ["bad inputs", "kills", "damaged folders", "concurrency", "outputs replacing inputs"]
    result = {
        "command": "python bench/probe.py --minutes " + f"{args.minutes:g}",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip(),
        "seconds": round(time.monotonic() - started),
        "groups": {k: probe.results.get(k, {"trials": 0, "failed": 0, "failures": []}) for k in rows},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"{'probe':26s} {'trials':>6s} {'failed':>6s}")
    for k in rows:
        g = result["groups"][k]
        print(f"{k:26s} {g['trials']:6d} {g['failed']:6d}")
        for f in g["failures"][:5]:
            print("    " + f)
    print(f"({result['seconds']} s; details in {args.out})")


if __name__ == "__main__":
    main()
