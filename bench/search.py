"""Duplicate search at scale: encode, index, query latency, HNSW recall, dedupe of 1M texts.

Corpus: every distinct question and sentence in the shared data (pair sets, InsuranceQA and
SimpleQuestions questions); for scale, texts made by joining two random corpus texts, up to
--size (default 1,000,000). Model: a trained model folder (make demo writes runs/demo-model).

    .venv/bin/python bench/search.py --model runs/demo-model [--size 1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import faiss
import numpy as np

from siamese import SiameseModel, datasets, read_texts
from siamese.search import clusters, duplicate_pairs

HERE = Path(__file__).resolve().parent


def corpus_texts() -> list[str]:
    root = datasets.data_root()
    texts = set(read_texts(root / "insuranceqa/questions.csv", "question"))
    for split in ("valid", "test"):
        texts |= set(read_texts(root / f"simplequestions/{split}.csv", "question"))
    for name in datasets.CATALOGUE:
        p = datasets.load(name, root)
        texts |= set(p.text1) | set(p.text2)
    return sorted(texts)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def latency(index, queries: np.ndarray, k: int = 10) -> dict:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        index.search(q[None, :], k)
        times.append((time.perf_counter() - t0) * 1000)
    times = np.array(times)
    return {"p50_ms": round(float(np.percentile(times, 50)), 3), "p99_ms": round(float(np.percentile(times, 99)), 3),
            "qps_single": round(1000 / float(times.mean()), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--threshold", type=float, default=None, help="dedupe threshold (default: the model's)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "search.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    model = SiameseModel.load(args.model)
    base = corpus_texts()
    extra = args.size - len(base)
    texts = base + [f"{base[i]} {base[j]}" for i, j in rng.integers(0, len(base), size=(max(extra, 0), 2))]
    res = {"distinct_shared_texts": len(base), "texts": len(texts)}

    t0 = time.perf_counter()
    vectors = model.encode(texts, batch_size=1024)
    res["encode_seconds"] = round(time.perf_counter() - t0, 1)
    res["encode_texts_per_second"] = round(len(texts) / res["encode_seconds"])

    t0 = time.perf_counter()
    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(vectors)
    res["flat_build_seconds"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(vectors.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 64
    hnsw.add(vectors)
    hnsw.hnsw.efSearch = 64
    res["hnsw_build_seconds"] = round(time.perf_counter() - t0, 1)

    queries = model.encode([texts[i] for i in rng.integers(0, len(texts), 500)])
    res["flat_latency"] = latency(flat, queries)
    res["hnsw_latency"] = latency(hnsw, queries)
    _, exact = flat.search(queries, 10)
    _, approx = hnsw.search(queries, 10)
    res["hnsw_recall@10"] = round(float(np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)])), 4)

    t = model.threshold if args.threshold is None else args.threshold
    t0 = time.perf_counter()
    pairs = list(duplicate_pairs(vectors, t, k=10, kind="hnsw"))
    groups = clusters(len(texts), pairs)
    res["dedupe"] = {"threshold": t, "k": 10, "pairs": len(pairs), "clusters": len(groups),
                     "seconds_after_encoding": round(time.perf_counter() - t0, 1)}
    res["dedupe"]["seconds_end_to_end"] = round(res["dedupe"]["seconds_after_encoding"] + res["encode_seconds"], 1)
    res["peak_rss_mb"] = round(peak_mb())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
