"""Does a cross-encoder's correction of a prior bi-encoder carry over to other sets? A quick probe
(~10 minutes on 2 cores, fp32): train a MiniLM cross-encoder over MiniLM's cosine (siamese.cross,
``CrossConfig(prior="minilm")``) on N pairs of the given shared sets, then compare ROC-AUC with
the prior alone on the Quora sample, MSRP test and SemEval CQA dev.

    SIAMESE_DATA=../shared/data .venv/bin/python bench/cross_prior.py --sets semeval-train msrp-train --pairs 4000

Writes bench/results/cross_prior.json (one entry per set list, kept across runs).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from siamese import datasets
from siamese.cross import CrossConfig, CrossTrainConfig, train_cross

HERE = Path(__file__).resolve().parent
TESTS = ("quora-sample", "msrp-test", "semeval-dev")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--sets", nargs="+", default=["semeval-train", "msrp-train"], help="Shared training sets to draw from."
    )
    p.add_argument("--pairs", type=int, default=4000, help="Pairs drawn from them (seed 0).")
    p.add_argument("--prior", default="minilm", help="The bi-encoder corrected.")
    p.add_argument("--out", type=Path, default=HERE / "results" / "cross_prior.json")
    args = p.parse_args()
    root = datasets.data_root()
    pairs = datasets.load_many(args.sets, root)
    pairs = pairs.subset(np.random.default_rng(0).choice(len(pairs), min(args.pairs, len(pairs)), replace=False))
    started = time.perf_counter()
    model = train_cross(
        pairs,
        datasets.load_many(datasets.VALIDATION, root),
        model_config=CrossConfig(prior=args.prior, max_length=128),
        config=CrossTrainConfig(batch_size=16, lr=5e-5, precision="fp32"),
        progress=False,
    )
    row = {
        "sets": args.sets,
        "pairs": len(pairs),
        "prior": model.info["prior"],
        "train_seconds": round(time.perf_counter() - started),
        "loss": model.info["training"]["history"][-1]["loss"],
    }
    for name in TESTS:
        test = datasets.load(name, root)
        row[name] = {
            "cross_encoder": round(roc_auc_score(test.labels, model.similarity(test.text1, test.text2)), 4),
            "prior_alone": round(roc_auc_score(test.labels, model.prior_cosines(test.text1, test.text2)), 4),
        }
    rows = json.loads(args.out.read_text()) if args.out.is_file() else {}
    rows[" ".join(args.sets) + f" {len(pairs)} {args.prior}"] = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
