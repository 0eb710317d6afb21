"""What reusing vectors saves: the 16,889 InsuranceQA questions, all-MiniLM-L6-v2, the commands a
user runs one after the other, each timed whole (start-up included):

1. ``siamese dedupe MINILM --data questions.csv --out RUN`` (encodes every distinct question);
2. ``siamese index build MINILM --data questions.csv --out IDX --reuse RUN`` (takes the run's vectors);
3. ``siamese index build MINILM --data questions.csv --out FRESH`` (encodes them all again: before --reuse);
4. ``siamese dedupe MINILM --data questions.csv --out RUN2 --reuse IDX`` (takes the index's vectors).

    make bench-reuse   # -> bench/results/reuse.json (~15 min on 2 cores)

One run of each (the encodings take minutes). The load average is recorded; numbers taken while
other work shares the cores are marked ``measured_under_load``: compare the rows of one run only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "reuse.json"


def timed(label: str, command: list[str]) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(command + ["--json", "--quiet"], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {proc.returncode}\n{proc.stderr}")
    result = json.loads(proc.stdout)
    reused = result.get("reused")
    reused = reused.get("vectors") if isinstance(reused, dict) else reused
    print(f"{label}: {seconds:.1f} s (vectors reused: {reused or 0})", flush=True)
    return {"seconds": round(seconds, 1), "reused_vectors": reused or 0}


def main() -> None:
    from siamese.data.datasets import data_root
    from siamese.models.sentence_encoder import from_pretrained

    questions = str(data_root() / "insuranceqa" / "questions.csv")
    cli = [sys.executable, "-m", "siamese"]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = str(from_pretrained("minilm").save(tmp / "minilm"))
        rows = {
            "dedupe": timed("dedupe", [*cli, "dedupe", model, "--data", questions, "--out", str(tmp / "run")]),
            "index_build_reusing_the_run": timed(
                "index build --reuse RUN",
                [
                    *cli,
                    "index",
                    "build",
                    model,
                    "--data",
                    questions,
                    "--out",
                    str(tmp / "idx"),
                    "--reuse",
                    str(tmp / "run"),
                ],
            ),
            "index_build_encoding_again": timed(
                "index build (encoding again)",
                [*cli, "index", "build", model, "--data", questions, "--out", str(tmp / "fresh")],
            ),
            "dedupe_reusing_the_index": timed(
                "dedupe --reuse IDX",
                [*cli, "dedupe", model, "--data", questions, "--out", str(tmp / "run2"), "--reuse", str(tmp / "idx")],
            ),
        }
    load_after = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    saved = rows["index_build_encoding_again"]["seconds"] - rows["index_build_reusing_the_run"]["seconds"]
    print(f"index build: {saved:.1f} s saved by --reuse", flush=True)
    OUT.write_text(
        json.dumps(
            {
                "texts": 16889,
                "model": "all-MiniLM-L6-v2",
                "cores": cores,
                "load_average": [round(load_before, 2), round(load_after, 2)],
                "measured_under_load": max(load_before, load_after) > 0.5 * cores,
                "commands": rows,
                "index_build_seconds_saved": round(saved, 1),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {OUT}")


if __name__ == "__main__":
    main()
