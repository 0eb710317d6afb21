"""Start-up time of the commands a user runs first (target: each under 2 s on 2 cores), median of 5:

- ``siamese predict MINILM_FOLDER "a" "b"``: Python, imports, loading MiniLM, one pair;
- ``siamese search INDEX "query"``: an index of 1,000 InsuranceQA questions built by MiniLM;
- ``siamese predict MISSING_FOLDER "a" "b"``: a user error (one line, exit 2);
- ``SiameseModel.load(MINILM_FOLDER)`` in a running Python (imports done): the folder's load alone.

    make bench-startup   # -> bench/results/startup.json

The load average at the start is recorded; numbers taken while other work shares the cores are
marked ``measured_under_load`` (load average above 0.5 per core) and are not the figure to quote.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "startup.json"
RUNS = 5


def timed(command: list[str], *, expect: int = 0) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(command)}: exit {proc.returncode}\n{proc.stderr}")
    return seconds


def median_of(label: str, run) -> dict:
    times = [run() for _ in range(RUNS)]
    print(f"{label}: median {statistics.median(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)})", flush=True)
    return {"median_s": round(statistics.median(times), 3), "runs_s": [round(t, 3) for t in times]}


def main() -> None:
    from siamese import SiameseModel
    from siamese.data.datasets import data_root
    from siamese.data.pairs import read_texts
    from siamese.models.sentence_encoder import from_pretrained
    from siamese.search import DuplicateIndex

    load_before = os.getloadavg()[0]
    cli = [sys.executable, "-m", "siamese"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = from_pretrained("minilm").save(Path(tmp) / "minilm")
        index = DuplicateIndex(SiameseModel.load(folder))
        index.add(read_texts(data_root() / "insuranceqa" / "questions.csv", "question")[:1000])
        index.save(Path(tmp) / "index")
        results = {
            "predict": median_of("predict", lambda: timed([*cli, "predict", str(folder), "a", "b"])),
            "search": median_of("search", lambda: timed([*cli, "search", str(Path(tmp) / "index"), "renters"])),
            "error": median_of("error", lambda: timed([*cli, "predict", str(Path(tmp) / "nope"), "a", "b"], expect=2)),
            "load_minilm_in_process": median_of("load", lambda: _load_seconds(SiameseModel, folder)),
        }
    load_after = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    OUT.write_text(
        json.dumps(
            {
                "cores": cores,
                "load_average": [round(load_before, 2), round(load_after, 2)],
                "measured_under_load": max(load_before, load_after) > 0.5 * cores,
                "runs": RUNS,
                "commands": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {OUT}")


def _load_seconds(model_class, folder: Path) -> float:
    started = time.perf_counter()
    model_class.load(folder)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
