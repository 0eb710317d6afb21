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

    # an in-batch ranking term (MultipleNegativesRankingLoss both ways) added to CoSENT: left off
    python bench/learn_recipe_selection.py --budget 200 --variant 'inbatch1={"in_batch": 1.0}' \\
        mqp:0 twitter-url:0 msrp:0 sick:0 paws-qqp:0 semeval-cqa:0 ... (seeds 0-2) \\
        > bench/results/learn-recipe-selection-inbatch-200.jsonl
    # a pull towards the pretrained weights (L2-SP, in place of weight decay): left off
    python bench/learn_recipe_selection.py --budget 200 --variant 'pull0.1={"pull": 0.1, "weight_decay": 0.0}' \\
        ... twitter-url:0 ... semeval-cqa:1 > bench/results/learn-recipe-selection-pull-200.jsonl
    # sentence-transformers' recipe (bench/learn.py's st contender) on the same pool pairs
    python bench/learn_recipe_selection.py --no-default --st sick:0 sick:1 msrp:0
    # the default recipe's cosines blended with MiniLM's: a*tuned + (1-a)*MiniLM (a=1: the fine-tune alone),
    # each blend's threshold the best cut of the labels' blended cosines
    python bench/learn_recipe_selection.py --blend 0 0.25 0.5 0.75 1 sick:0 msrp:0 ...
    # from all-mpnet-base-v2 (--base mpnet): the whole network and more epochs, beside sentence-transformers' recipe
    python bench/learn_recipe_selection.py --base mpnet --st --variant 'frozen0={"frozen_layers": 0}' \\
        --variant 'epochs8={"epochs": 8}' sick:0 ... > bench/results/learn-recipe-selection-mpnet-200.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

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
    ap.add_argument("--st", action="store_true", help="also sentence-transformers' recipe (bench/learn.py's st)")
    ap.add_argument("--base", default="minilm", choices=["minilm", "mpnet"], help="the encoder to start from")
    ap.add_argument("--blend", type=float, nargs="+", default=[], help="the default's cosines blended with MiniLM's")
    ap.add_argument("specs", nargs="+", metavar="SET:SEED")
    args = ap.parse_args()
    if args.blend and args.base != "minilm":
        ap.error("--blend mixes the fine-tune's cosines with MiniLM's: it needs --base minilm")
    variants = ([] if args.no_default else [("default", {})]) + args.variant
    for spec in args.specs:
        name, seed, labels, rest, _ = bench.train_side(spec, args.budget)
        row: dict = {"set": name, "seed": seed, "base": args.base, "labels": len(labels), "rest": len(rest)}
        for label, keywords in variants:
            started = time.perf_counter()
            model = learn(labels, args.base, options=LearnOptions(**{"seed": seed, "device": "cpu", **keywords}))
            tuned = bench.cosines(model, rest)
            scored = bench.metrics(tuned, rest.labels, model.threshold)
            learned = model.info["learned"]
            row[label] = {
                "accuracy": round(scored["accuracy"], 4),
                "roc_auc": round(scored["roc_auc"], 4),
                "chosen": learned["chosen"],
                "epoch": learned["epoch"],
                "seconds": round(time.perf_counter() - started),
            }
            if label == "default" and args.blend:
                row["blend"] = blends(model, tuned, labels, rest, args.blend)
        if args.st:
            started = time.perf_counter()
            encoder, threshold = bench.st_recipe(labels, seed, base=args.base)
            scored = bench.metrics(bench.cosines(encoder, rest), rest.labels, threshold)
            row["st"] = {
                "accuracy": round(scored["accuracy"], 4),
                "roc_auc": round(scored["roc_auc"], 4),
                "seconds": round(time.perf_counter() - started),
            }
        print(json.dumps(row), flush=True)


def blends(model, tuned: np.ndarray, labels, rest, weights: list[float]) -> dict:
    """Accuracy (threshold: the best cut of the labels' blended cosines) and ROC-AUC on ``rest`` of
    ``a * model's cosine (tuned, on rest) + (1 - a) * MiniLM's`` for each weight ``a``."""
    import learn as bench

    from siamese.models.sentence_encoder import load_bi_encoder

    minilm = load_bi_encoder("minilm", device="cpu")
    plain = bench.cosines(minilm, rest)
    tuned_labels, plain_labels = bench.cosines(model, labels), bench.cosines(minilm, labels)
    out = {}
    for a in weights:
        cut = bench.best_cut(a * tuned_labels + (1 - a) * plain_labels, labels.labels)
        scored = bench.metrics(a * tuned + (1 - a) * plain, rest.labels, cut)
        out[str(a)] = {"accuracy": round(scored["accuracy"], 4), "roc_auc": round(scored["roc_auc"], 4)}
    return out


if __name__ == "__main__":
    main()
