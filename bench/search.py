"""Duplicate search at scale: encode, index, query latency and throughput, HNSW recall, dedupe of 1M texts,
and sentence-transformers' ``paraphrase_mining`` on the same embeddings.

Corpus: every distinct question and sentence in the shared data (pair sets, InsuranceQA and
SimpleQuestions questions); for scale, texts made by joining two random corpus texts, up to
--size (default 1,000,000). Model: a trained model folder (make bench-search distils runs/student).

    .venv/bin/pip install -e '.[bench]'          # sentence-transformers, for the paraphrase_mining comparison
    .venv/bin/python bench/search.py --model runs/student [--size 1000000] [--compare-size 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from siamese import SiameseModel, datasets, read_texts
from siamese.search import communities, components, dedupe, duplicate_pairs, faiss_index, fill_index

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


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def latency(index, queries: np.ndarray, k: int = 10) -> dict:
    """One query at a time, as a service answers them: p50 / p99 in ms."""
    times = []
    for q in queries:
        _, s = timed(index.search, q[None, :], k)
        times.append(s * 1000)
    return {"p50_ms": round(float(np.percentile(times, 50)), 3), "p99_ms": round(float(np.percentile(times, 99)), 3)}


def throughput(index, queries: np.ndarray, k: int = 10, batch: int = 1000) -> float:
    """Queries per second when they come in batches (FAISS spreads a batch over the cores)."""
    _, s = timed(lambda: [index.search(queries[i : i + batch], k) for i in range(0, len(queries), batch)])
    return round(len(queries) / s)


def recall(approx: np.ndarray, exact: np.ndarray) -> float:
    return round(float(np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact)])), 4)


def pair_keys(first, second, n: int) -> set:
    return set((np.asarray(first, dtype=np.int64) * n + np.asarray(second, dtype=np.int64)).tolist())


def paraphrase_mining_comparison(vectors: np.ndarray, threshold: float, k: int) -> dict:
    """sentence-transformers' exact all-pairs mining vs ours (flat and HNSW), same vectors, same k."""
    import torch
    from sentence_transformers.util import paraphrase_mining_embeddings

    n = len(vectors)
    mined, st_s = timed(paraphrase_mining_embeddings, torch.from_numpy(vectors), top_k=k, max_pairs=50 * n)
    st = [(i, j) for s, i, j in mined if s > threshold]
    st_keys = pair_keys([min(p) for p in st], [max(p) for p in st], n)
    res = {
        "texts": n,
        "k": k,
        "threshold": threshold,
        "paraphrase_mining": {"seconds": round(st_s, 1), "pairs_above_threshold": len(st_keys)},
    }
    for kind in ("flat", "ivf", "hnsw"):
        pairs, s = timed(duplicate_pairs, vectors, threshold, k=k, kind=kind)
        keys = pair_keys(pairs.first, pairs.second, n)
        res[f"siamese_{kind}"] = {
            "seconds": round(s, 1),
            "pairs_above_threshold": len(keys),
            "share_of_paraphrase_mining_pairs_found": round(len(keys & st_keys) / max(len(st_keys), 1), 4),
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument(
        "--compare-size", type=int, default=100_000, help="texts for the paraphrase_mining comparison (0: skip)"
    )
    ap.add_argument("--threshold", type=float, default=None, help="dedupe threshold (default: the model's)")
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--ef-search", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512])
    ap.add_argument("--nprobe", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "search.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    model = SiameseModel.load(args.model)
    t = model.threshold if args.threshold is None else args.threshold
    base = corpus_texts()
    extra = args.size - len(base)
    texts = base + [f"{base[i]} {base[j]}" for i, j in rng.integers(0, len(base), size=(max(extra, 0), 2))]
    res = {"distinct_shared_texts": len(base), "texts": len(texts), "faiss_threads": faiss.omp_get_max_threads()}

    vectors, s = timed(model.encode, texts, batch_size=1024)
    res["encode"] = {"seconds": round(s, 1), "texts_per_second": round(len(texts) / s)}

    flat, s = timed(fill_index, faiss_index("flat", vectors.shape[1]), vectors)
    res["flat"] = {"build_seconds": round(s, 2)}
    hnsw = faiss_index("hnsw", vectors.shape[1])
    hnsw.hnsw.efConstruction = args.ef_construction
    _, s = timed(fill_index, hnsw, vectors)
    res["hnsw"] = {"M": 32, "efConstruction": args.ef_construction, "build_seconds": round(s, 1)}
    ivf, s = timed(fill_index, faiss_index("ivf", vectors.shape[1], size=len(vectors)), vectors)
    res["ivf"] = {"lists": ivf.nlist, "build_seconds": round(s, 1)}

    queries = model.encode([texts[i] for i in rng.integers(0, len(texts), 2000)])
    res["flat"].update(latency(flat, queries[:300]), queries_per_second=throughput(flat, queries))
    _, exact = flat.search(queries, 10)

    def sweep(index, knob: str, values: list[int]) -> list[dict]:
        rows = []
        for value in values:
            if knob == "efSearch":
                index.hnsw.efSearch = value
            else:
                index.nprobe = value
            _, approx = index.search(queries, 10)
            rows.append(
                {
                    knob: value,
                    "recall@10": recall(approx, exact),
                    **latency(index, queries[:500]),
                    "queries_per_second": throughput(index, queries),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        return rows

    res["hnsw"]["efSearch_sweep"] = sweep(hnsw, "efSearch", args.ef_search)
    res["ivf"]["nprobe_sweep"] = sweep(ivf, "nprobe", args.nprobe)
    del flat, hnsw, ivf

    # The dedupe command's own code path, end to end: encode, IVF pairs, components, the run folder out.
    with tempfile.TemporaryDirectory() as tmp:
        run, s = timed(dedupe, model, texts, Path(tmp) / "run", threshold=t, k=10)
        summary = run.summary()
    res["dedupe_end_to_end"] = {
        **{k: summary[k] for k in ("threshold", "pairs", "clusters", "clustered_texts")},
        "k": 10,
        "kind": "auto (ivf)",
        "clustering": "components",
        "seconds": round(s, 1),
    }
    print(json.dumps(res["dedupe_end_to_end"]), flush=True)
    pairs, s = timed(duplicate_pairs, vectors, t, k=10)
    res["dedupe_steps"] = {"pairs_seconds": round(s, 1)}
    for name, group in (("components", components), ("communities", communities)):
        groups, s = timed(group, len(texts), pairs)
        res["dedupe_steps"][name] = {
            "clusters": len(groups),
            "largest": max(map(len, groups), default=0),
            "seconds": round(s, 1),
        }
    print(json.dumps(res["dedupe_steps"]), flush=True)
    res["peak_rss_mb"] = round(peak_mb())
    if args.compare_size:
        res["paraphrase_mining"] = paraphrase_mining_comparison(vectors[: args.compare_size], t, 10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
