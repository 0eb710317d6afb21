"""Which recipe does ``siamese train --from`` use? Variants of :class:`LearnOptions` compared on the
train side only: for each ``set:seed``, bench-learn's labels at ``--budget``, every variant scored on
up to 1,500 pool pairs sharing no text with the labels (accuracy at each model's own threshold,
ROC-AUC), never on the test split. One JSON line per set and seed.

    # refit (train again on every label after the held-out quarter chose the epoch): left off
    python bench/learn_recipe_selection.py --budget 1000 --variant 'refit={"refit": true}' \\
        mqp:0 twitter-url:0 msrp:0 paws-qqp:0 sick:0 > bench/results/learn-refit-selection.jsonl
    # more epochs, the whole network, a higher learning rate at 200 labels (all left off)
    python bench/learn_recipe_selection.py --budget 200 --variant 'epochs8={"epochs": 8}' \\
        --variant 'frozen0={"frozen_layers": 0}' --variant 'lr1e-4={"lr": 1e-4}' \\
        twitter-url:0 sick:0 msrp:0 paws-qqp:0 mqp:0 semeval-cqa:0 > bench/results/learn-recipe-selection-200.jsonl

(The attention-dropout and halfway-weights rows of that file came from variants since removed from
``LearnOptions``: docs/benchmarks.md.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def variant(text: str) -> tuple[str, dict]:
    """``NAME=JSON`` → (name, LearnOptions keywords)."""
    name, _, options = text.partition("=")
    return name, json.loads(options or "{}")


def main() -> None:
    import learn as bench  # bench/learn.py: the same sets, splits and labels

    from siamese.training.learn import LearnOptions, learn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="200")
    ap.add_argument("--variant", type=variant, action="append", default=[], help="NAME=JSON of LearnOptions keywords")
    ap.add_argument("--no-default", action="store_true", help="leave out the default recipe")
    ap.add_argument("specs", nargs="+", metavar="SET:SEED")
    args = ap.parse_args()
    variants = ([] if args.no_default else [("default", {})]) + args.variant
    for spec in args.specs:
        name, seed_text = spec.split(":")
        seed = int(seed_text)
        pool, _, _ = bench.load_set(name, 2000)
        rows = bench.consistent(pool, bench.labelled(pool, args.budget, seed))
        labels, rest = pool.subset(rows), bench.outside_labels(pool, rows)
        row: dict = {"set": name, "seed": seed, "labels": len(rows), "rest": len(rest)}
        for label, keywords in variants:
            started = time.perf_counter()
            model = learn(labels, "minilm", options=LearnOptions(**{"seed": seed, "device": "cpu", **keywords}))
            scored = bench.metrics(bench.cosines(model, rest), rest.labels, model.threshold)
            learned = model.info["learned"]
            row[label] = {
                "accuracy": round(scored["accuracy"], 4),
                "roc_auc": round(scored["roc_auc"], 4),
                "chosen": learned["chosen"],
                "epoch": learned["epoch"],
                "seconds": round(time.perf_counter() - started),
            }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
