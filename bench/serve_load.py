"""The HTTP service under load: p50/p99 latency and throughput with 16 concurrent clients, request
batching on vs off.

Each client keeps one connection and sends /similarity requests of one question pair (what the
web page sends) back to back for --seconds. The server is `siamese serve` in its own process;
the clients are threads of this one. Model: --model FOLDER, else a quick LSTM trained here
(default width, 1 epoch on 2,000 MSRP train pairs: quality does not matter, cost per text does).

    .venv/bin/python bench/serve_load.py [--model MODEL_FOLDER] [--clients 16] [--seconds 15]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from siamese import TrainConfig, datasets, train

HERE = Path(__file__).resolve().parent
SCRIPT = Path(sys.executable).parent / "siamese"


def quick_model(folder: Path) -> Path:
    pairs = datasets.load("msrp-train", datasets.data_root())
    model = train(pairs.subset(range(2000)), config=TrainConfig(epochs=1, seed=0), progress=False)
    return model.save(folder / "model")


def start(model: Path, extra: list[str]) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(SCRIPT), "serve", str(model), "--port", str(port), "--log-level", "warning", *extra])
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}") from None
            time.sleep(0.2)
    raise SystemExit("server did not start")


def load(port: int, clients: int, seconds: float, texts: list[str]) -> dict:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client(seed: int):
        rng = np.random.default_rng(seed)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine, codes = [], {}
        while time.perf_counter() < stop:
            a, b = rng.choice(len(texts), 2)
            body = json.dumps({"pairs": [[texts[a], texts[b]]]})
            t = time.perf_counter()
            conn.request("POST", "/similarity", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            mine.append(time.perf_counter() - t)
            codes[r.status] = codes.get(r.status, 0) + 1
        conn.close()
        with lock:
            latencies.extend(mine)
            for k, v in codes.items():
                statuses[k] = statuses.get(k, 0) + v

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start_time = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start_time
    ms = np.array(latencies) * 1000
    return {
        "requests": len(ms),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "requests_per_s": round(len(ms) / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "mean_ms": round(float(ms.mean()), 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "serve_load.json")
    args = ap.parse_args()
    texts = datasets.load("msrp-val", datasets.data_root())
    texts = sorted(set(texts.text1) | set(texts.text2))
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or quick_model(Path(tmp))
        results = {}
        for name, extra in (("batching on", []), ("batching off", ["--no-batching"])):
            proc, port = start(model, extra)
            try:
                load(port, args.clients, 2, texts)  # warm up
                results[name] = load(port, args.clients, args.seconds, texts)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            print(f"{name:13s} {results[name]}", flush=True)
    report = {
        "model": str(args.model or "quick LSTM (1 epoch, 2,000 MSRP pairs)"),
        "clients": args.clients,
        "seconds": args.seconds,
        "cpus": os.cpu_count(),
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| | requests/s | p50 ms | p99 ms |\n|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['requests_per_s']} | {r['p50_ms']} | {r['p99_ms']} |")


if __name__ == "__main__":
    main()
