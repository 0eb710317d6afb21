"""Training and encoding speed of the Siamese LSTM, side by side in one run.

Contenders, each trained on the same duplicate pairs (default: PAWS-QQP train positives, i.e.
Quora questions; --pairs twitter-url-train for headline/tweet pairs)
with the same model (Embedding 128 → LSTM 128 → mean → L2), batch 256, Adam 0.01:
  keras      the Keras reference (bench/keras_seed.py, TensorFlow in bench/.venv-tf)
  naive      a direct PyTorch port: batches padded to their longest text, dense Adam, fp32
  ours-fp32  siamese.train, precision fp32
  ours-bf16  siamese.train, precision bf16 (what the default "auto" picks on CPUs with native
             bfloat16, AVX512-BF16 or AMX; left out on CPUs without it): the fused LSTM kernel
  ours-bf16-no-kernels  the same with siamese's C++ kernels off (SIAMESE_KERNELS=0): nn.LSTM under
             bf16 autocast and the lazy Adam in PyTorch ops, i.e. what the kernels replace
Each run is a fresh process (own peak memory); rounds are interleaved so machine noise hits all
contenders alike; the table quotes medians. Encoding speed is measured on ~50k real questions.

    .venv/bin/python bench/speed.py [--rounds 3] [--epochs 6] [--pairs paws-qqp-train] [--setup-tf]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TF_PY = HERE / ".venv-tf" / "bin" / "python"


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def quality(model) -> dict:
    """ROC-AUC on held-out Quora questions, to check the speed levers cost no accuracy."""
    from siamese import datasets
    from siamese.evaluation.metrics import classification_report

    out = {}
    for name in ("quora-sample", "paws-qqp-dev-test"):
        pairs = datasets.load(name)
        out[name] = round(
            classification_report(model.similarity_pairwise(pairs.text1, pairs.text2), pairs.labels, 0.5)["roc_auc"], 4
        )
    return out


def worker_ours(args) -> dict:
    from siamese import TrainConfig, datasets, train

    pairs = datasets.load(args.pairs)
    model = train(
        pairs, config=TrainConfig(epochs=args.epochs, precision=args.precision, seed=args.seed), progress=False
    )
    rates = [h["pairs_per_second"] for h in model.info["training"]["history"]]
    return {"pairs_per_second": statistics.median(rates[1:] or rates), "epoch_rates": rates, "roc_auc": quality(model)}


def worker_naive(args) -> dict:
    """What a straightforward PyTorch port of the Keras reference looks like."""
    import numpy as np
    import torch
    from torch import nn

    from siamese import ModelConfig, SiameseModel, datasets, triplet_loss
    from siamese.data.vocabulary import pad

    torch.manual_seed(args.seed)
    pairs = datasets.load(args.pairs).positives()
    model = SiameseModel.build(pairs.text1 + pairs.text2, ModelConfig(seed=args.seed))

    class Branch(nn.Module):
        def __init__(self, vocab):
            super().__init__()
            self.embedding = nn.Embedding(vocab, 128)
            self.lstm = nn.LSTM(128, 128, batch_first=True)

        def forward(self, ids, lengths):
            states, _ = self.lstm(self.embedding(ids))
            mask = (ids != 0).unsqueeze(-1).float()
            return nn.functional.normalize((states * mask).sum(1) / mask.sum(1).clamp(min=1), dim=-1)

    branch = Branch(model.vectorizer.vocab_size)
    ids1, ids2 = model.vectorizer.encode(pairs.text1), model.vectorizer.encode(pairs.text2)
    opt = torch.optim.Adam(branch.parameters(), lr=0.01)
    rng = np.random.default_rng(args.seed)
    rates = []
    for _ in range(args.epochs):
        order = rng.permutation(len(ids1))
        t0 = time.perf_counter()
        for i in range(0, len(order), 256):
            rows = order[i : i + 256]
            if len(rows) < 2:
                continue
            a, la = pad([ids1[r] for r in rows])
            b, lb = pad([ids2[r] for r in rows])
            v1 = branch(torch.from_numpy(a), torch.from_numpy(la))
            v2 = branch(torch.from_numpy(b), torch.from_numpy(lb))
            loss = triplet_loss(v1, v2)
            opt.zero_grad()
            loss.backward()
            opt.step()
        rates.append(len(order) / (time.perf_counter() - t0))
    model.encoder = _as_encoder(branch)
    return {
        "pairs_per_second": statistics.median(rates[1:] or rates),
        "epoch_rates": [round(r, 1) for r in rates],
        "roc_auc": quality(model),
    }


def _as_encoder(branch):
    from siamese.models.encoders import LSTMEncoder

    enc = LSTMEncoder(branch.embedding.num_embeddings)
    enc.load_state_dict(branch.state_dict())
    return enc


def worker_encode(args) -> dict:
    """Inference: encode ~50k real questions, median texts/s over 3 passes."""
    from siamese import TrainConfig, datasets, read_texts, train

    root = datasets.data_root()
    texts = read_texts(root / "insuranceqa/questions.csv", "question") + read_texts(
        root / "simplequestions/test.csv", "question"
    )
    model = train(datasets.load("paws-qqp-train"), config=TrainConfig(epochs=1), progress=False)
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        model.encode(texts, batch_size=512)
        rates.append(len(texts) / (time.perf_counter() - t0))
    return {"texts": len(texts), "texts_per_second": statistics.median(rates), "runs": [round(r) for r in rates]}


def run(cmd: list[str], env=None) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pairs", default="paws-qqp-train", help="shared data set whose duplicates are trained on")
    p.add_argument("--no-encode", action="store_true", help="skip the encoding benchmark")
    p.add_argument("--setup-tf", action="store_true", help="create bench/.venv-tf first (TensorFlow CPU)")
    p.add_argument("--worker", choices=["ours", "naive", "encode"], help=argparse.SUPPRESS)
    p.add_argument("--precision", default="auto", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help="JSON results (default bench/results/speed-<pairs>.json)")
    args = p.parse_args()

    if args.worker:
        result = {"ours": worker_ours, "naive": worker_naive, "encode": worker_encode}[args.worker](args)
        result["peak_rss_mb"] = round(peak_rss_mb(), 1)
        print(json.dumps(result))
        return

    if args.setup_tf:
        subprocess.run(["bash", str(HERE / "tf_env.sh")], check=True)
    from siamese import datasets

    pairs = datasets.load(args.pairs).positives()
    words = statistics.mean(len(t.split()) for t in pairs.text1 + pairs.text2)
    me = [sys.executable, __file__, "--epochs", str(args.epochs), "--seed", str(args.seed), "--pairs", args.pairs]
    contenders = {
        "naive": me + ["--worker", "naive"],
        "ours-fp32": me + ["--worker", "ours", "--precision", "fp32"],
        "ours-bf16": me + ["--worker", "ours", "--precision", "bf16"],
        "ours-bf16-no-kernels": me + ["--worker", "ours", "--precision", "bf16"],
    }
    env = {"ours-bf16-no-kernels": {**os.environ, "SIAMESE_KERNELS": "0"}}
    import torch

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        del contenders["ours-bf16"], contenders["ours-bf16-no-kernels"]
    with tempfile.TemporaryDirectory() as tmp:
        if TF_PY.exists():
            csv_path = Path(tmp) / "pairs.csv"
            with open(csv_path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["text1", "text2"])
                w.writerows(zip(pairs.text1, pairs.text2))
            contenders = {
                "keras": [
                    str(TF_PY),
                    str(HERE / "keras_seed.py"),
                    "--pairs",
                    str(csv_path),
                    "--epochs",
                    str(args.epochs),
                    "--batch-size",
                    "256",
                    "--threads",
                    "2",
                ],
                **contenders,
            }
        else:
            print("bench/.venv-tf missing: run with --setup-tf to include the Keras baseline", file=sys.stderr)
        runs: dict[str, list[dict]] = {k: [] for k in contenders}
        for r in range(args.rounds):
            for name, cmd in contenders.items():
                res = run(cmd, env.get(name))
                runs[name].append(res)
                print(
                    f"round {r + 1} {name}: {res['pairs_per_second']:.0f} pairs/s, peak {res['peak_rss_mb']:.0f} MB",
                    file=sys.stderr,
                )
        enc = None if args.no_encode else run(me + ["--worker", "encode"])

    summary = {
        "cpu": cpu_name(),
        "data": args.pairs,
        "pairs": len(pairs),
        "mean_words_per_text": round(words, 2),
        "epochs": args.epochs,
        "rounds": args.rounds,
        "training": {
            name: {
                "pairs_per_second_median": round(statistics.median(r["pairs_per_second"] for r in rs), 1),
                "pairs_per_second_runs": [round(r["pairs_per_second"], 1) for r in rs],
                "peak_rss_mb_median": round(statistics.median(r["peak_rss_mb"] for r in rs), 1),
                **(
                    {
                        "roc_auc_median": {
                            k: round(statistics.median(r["roc_auc"][k] for r in rs), 4) for k in rs[0]["roc_auc"]
                        }
                    }
                    if "roc_auc" in rs[0]
                    else {}
                ),
            }
            for name, rs in runs.items()
        },
        "encoding": enc,
    }
    base = summary["training"].get("keras", summary["training"]["naive"])["pairs_per_second_median"]
    for t in summary["training"].values():
        t["speedup_vs_" + ("keras" if "keras" in runs else "naive")] = round(t["pairs_per_second_median"] / base, 2)
    out = args.out or HERE / "results" / f"speed-{args.pairs}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
