"""Beyond one process: distributed training's speed-up, the Ray engine's overhead, the on-disk index.

    # 1 vs 2 training processes (the LSTM on PAWS-QQP + MSRP + Twitter URL duplicates; gathered and local negatives)
    .venv/bin/python bench/distributed.py train [--epochs 3]
    # --engine ray vs local on 100,000 texts with a fast model (a bag of words trained here)
    .venv/bin/python bench/distributed.py ray [--size 100000]
    # the sharded on-disk IVF index: build, memory, query latency against the in-memory IVF
    .venv/bin/python bench/distributed.py ondisk [--size 100000]

Each writes its section of bench/results/distributed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "distributed.json"
sys.path.insert(0, str(HERE))


def record(section: str, result: dict) -> None:
    saved = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    saved[section] = result
    RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
    print(json.dumps({section: result}, indent=2))


def bench_train(args) -> dict:
    from siamese import SiameseModel, datasets
    from siamese.evaluation.metrics import evaluate

    root = datasets.data_root()
    files = [root / datasets.CATALOGUE[name][0] for name in ("paws-qqp-train", "msrp-train", "twitter-url-train")]
    val = root / datasets.CATALOGUE["msrp-val"][0]
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (
            ("1 process", []),
            ("2 processes", ["--nproc", "2"]),
            ("2 processes, --no-gather", ["--nproc", "2", "--no-gather"]),
        ):
            out = Path(tmp) / name.replace(" ", "_").replace(",", "")
            cmd = [
                sys.executable,
                "-m",
                "siamese",
                "train",
                *[a for f in files for a in ("--data", str(f))],
                "--val-data",
                str(val),
                "--epochs",
                str(args.epochs),
                "--out",
                str(out),
                "--quiet",
                "--json",
                *extra,
            ]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
            wall = time.perf_counter() - t0
            if proc.returncode:
                raise SystemExit(proc.stderr)
            result = json.loads(proc.stdout)
            info = SiameseModel.load(out).info["training"]
            runs[name] = {
                "pairs_per_second": result["pairs_per_second"],
                "train_seconds": info["train_seconds"],
                "wall_seconds": round(wall, 1),
                "val_loss": result["val_loss"],
                "msrp_val_roc_auc": round(evaluate(SiameseModel.load(out), datasets.load("msrp-val"))["roc_auc"], 4),
            }
    base = runs["1 process"]["pairs_per_second"]
    for run in runs.values():
        run["speed_up"] = round(run["pairs_per_second"] / base, 2)
    return {"encoder": "lstm", "epochs": args.epochs, "cores": len(os.sched_getaffinity(0)), "runs": runs}


def fast_model(folder: Path):
    """A bag of words trained in seconds on MSRP: fast enough that the engine's own cost shows."""
    from siamese import ModelConfig, datasets, train
    from siamese.training.bi_encoder import TrainConfig

    model = train(
        datasets.load("msrp-train"),
        datasets.load("msrp-val"),
        model_config=ModelConfig(encoder="bow"),
        config=TrainConfig(epochs=2),
        progress=False,
    )
    model.save(folder)
    from siamese import SiameseModel

    return SiameseModel.load(folder, device="cpu")


def sample_texts(size: int) -> list[str]:
    from search import corpus_texts  # bench/search.py: every distinct question and sentence of the shared data

    texts = corpus_texts()
    rng = np.random.default_rng(0)
    return [texts[i] for i in rng.choice(len(texts), min(size, len(texts)), replace=False)]


def bench_ray(args) -> dict:
    import ray

    from siamese.search.pairs import duplicate_pairs
    from siamese.search.ray_engine import RayEngine

    texts = sample_texts(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        model = fast_model(Path(tmp) / "model")
        t0 = time.perf_counter()
        local = model.encode(texts)
        local_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pairs_local = duplicate_pairs(local, model.threshold, k=10)
        local_pairs_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        engine = RayEngine(actors=args.actors)  # starts a local cluster on this machine's CPUs
        start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        vectors = engine.encode(model, texts)
        ray_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        vectors = engine.encode(model, texts)  # again: the cluster is up, the actors start anew
        ray_again_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pairs_ray = engine.duplicate_pairs(vectors, model.threshold, k=10)
        ray_pairs_s = time.perf_counter() - t0
        ray.shutdown()
    return {
        "texts": len(texts),
        "model": "bow (2 epochs on MSRP)",
        "actors": engine.actors,
        "local": {
            "encode_seconds": round(local_s, 2),
            "texts_per_second": round(len(texts) / local_s),
            "pair_search_seconds": round(local_pairs_s, 2),
            "pairs": len(pairs_local),
        },
        "ray": {
            "cluster_start_seconds": round(start_s, 2),
            "encode_seconds": round(ray_s, 2),
            "encode_again_seconds": round(ray_again_s, 2),
            "pair_search_seconds": round(ray_pairs_s, 2),
            "pairs": len(pairs_ray),
            "same_vectors": bool(np.allclose(vectors, local, atol=1e-5)),
        },
        "overhead_seconds": round(start_s + ray_s - local_s, 2),
    }


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def bench_ondisk(args) -> dict:
    import faiss

    from siamese.search import faiss_index, fill_index
    from siamese.search.ondisk import build_ondisk, read_ondisk

    texts = sample_texts(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        model = fast_model(Path(tmp) / "model")
        vectors = model.encode(texts)
        np.save(Path(tmp) / "v.npy", vectors)
        mapped = np.load(Path(tmp) / "v.npy", mmap_mode="r")
        folder = Path(tmp) / "ondisk"
        folder.mkdir()
        t0 = time.perf_counter()
        build_ondisk(mapped, folder, shard_size=args.size // 10)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        memory = fill_index(faiss_index("ivf", vectors.shape[1], size=len(vectors)), vectors)
        memory_s = time.perf_counter() - t0
        before = rss_mb()
        index = read_ondisk(folder / "index.faiss")
        opened_mb = rss_mb() - before
        queries = vectors[np.random.default_rng(1).choice(len(vectors), 500, replace=False)]
        times = []
        for q in queries:
            t0 = time.perf_counter()
            index.search(q[None, :], 10)
            times.append((time.perf_counter() - t0) * 1000)
        _, on_rows = index.search(queries, 10)
        _, mem_rows = memory.search(queries, 10)
        agree = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(on_rows, mem_rows)])
        lists_mb = (folder / "lists.ivfdata").stat().st_size / 2**20
        nlist = faiss.extract_index_ivf(index).nlist
    return {
        "vectors": len(vectors),
        "dim": int(vectors.shape[1]),
        "lists": nlist,
        "shards": 10,
        "build_seconds": round(build_s, 2),
        "in_memory_ivf_build_seconds": round(memory_s, 2),
        "lists_file_mb": round(lists_mb, 1),
        "rss_added_when_opened_mb": round(opened_mb, 1),
        "query_p50_ms": round(float(np.percentile(times, 50)), 3),
        "query_p99_ms": round(float(np.percentile(times, 99)), 3),
        "top10_agreement_with_in_memory_ivf": round(float(agree), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["train", "ray", "ondisk"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--actors", type=int, default=None, help="Ray actors (default: cluster CPUs - 1)")
    args = parser.parse_args()
    result = {"train": bench_train, "ray": bench_ray, "ondisk": bench_ondisk}[args.what](args)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    result["note"] = "measured on a shared 2-core machine, under contention from other jobs"
    record(args.what, result)


if __name__ == "__main__":
    main()
