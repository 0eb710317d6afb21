"""What the model choice costs in a large dedupe: the static student end to end on 1M texts
(``siamese.search.dedupe``: encode, IVF 10-NN, pairs above the model's threshold, components,
the run folder), MiniLM (bf16, length-sorted) on a sample of the same texts with its 1M time
extrapolated; beside each, its quality on the shared Quora sample (ROC-AUC).

The 1M texts are bench/search.py's: the shared data's distinct texts plus random joins of two.
MiniLM's extrapolation: its measured encode rate on the sample times 1M, plus the student's
measured search-and-cluster time scaled by the vector widths (FAISS's work grows with it).

    .venv/bin/python bench/dedupe_models.py --student runs/student-minilm [--size 1000000] [--sample 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from search import corpus_texts, peak_mb
from sklearn.metrics import roc_auc_score

from siamese import SiameseModel, datasets
from siamese.models.sentence_encoder import from_pretrained
from siamese.search import dedupe

HERE = Path(__file__).resolve().parent


def quora_auc(model) -> float:
    pairs = datasets.load("quora-sample")
    return round(float(roc_auc_score(pairs.labels, model.similarity_pairwise(pairs.text1, pairs.text2))), 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--student", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--sample", type=int, default=20_000, help="texts MiniLM encodes to measure its rate")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "dedupe_models.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    base = corpus_texts()
    texts = base + [
        f"{base[i]} {base[j]}" for i, j in rng.integers(0, len(base), size=(max(args.size - len(base), 0), 2))
    ]
    student = SiameseModel.load(args.student)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        student.encode(texts[: args.sample])  # the encode rate on the same sample as MiniLM's
        student_rate = args.sample / (time.perf_counter() - started)
        started = time.perf_counter()
        run = dedupe(student, texts, Path(tmp) / "run", k=10)
        seconds = time.perf_counter() - started
        summary = run.summary()
    encode_seconds = len(texts) / student_rate
    rest = max(seconds - encode_seconds, 0.0)
    rows.append(
        {
            "model": "static student",
            "quora_roc_auc": quora_auc(student),
            "dim": student.dim,
            "sample_texts_per_second": round(student_rate),
            "dedupe_seconds": round(seconds, 1),
            "measured": True,
            "pairs": summary["pairs"],
            "clusters": summary["clusters"],
            "threshold": summary["threshold"],
        }
    )
    print(json.dumps(rows[-1]), flush=True)
    minilm = from_pretrained("minilm", datasets.validation_sets())
    minilm.encode(texts[:256])  # warm-up
    started = time.perf_counter()
    minilm.encode(texts[: args.sample])
    rate = args.sample / (time.perf_counter() - started)
    estimate = len(texts) / rate + rest * minilm.dim / student.dim
    rows.append(
        {
            "model": "all-MiniLM-L6-v2 (bf16 where native)",
            "quora_roc_auc": quora_auc(minilm),
            "dim": minilm.dim,
            "sample_texts_per_second": round(rate),
            "dedupe_seconds": round(estimate, 1),
            "measured": False,
        }
    )
    print(json.dumps(rows[-1]), flush=True)
    result = {
        "texts": len(texts),
        "sample": args.sample,
        "student": str(args.student),
        "student_search_and_cluster_seconds": round(rest, 1),
        "peak_rss_mb": round(peak_mb()),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
