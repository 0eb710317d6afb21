"""Above 600 labels ``siamese train --from`` holds one grouped quarter out to choose the epoch; is
the model trained on the other three quarters kept, or one trained again on every label
(``LearnOptions.refit``)? Decided on the train side only: for each ``set:seed``, bench-learn's
labels at ``--budget``, both recipes scored on up to 1,500 pool pairs sharing no text with the labels
(accuracy at each model's own threshold, ROC-AUC), never on the test split.

    python bench/learn_refit_selection.py --budget 1000 mqp:0 twitter-url:0 msrp:0 paws-qqp:0 sick:0 \\
        > bench/results/learn-refit-selection.jsonl
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


def main() -> None:
    import learn as bench  # bench/learn.py: the same sets, splits and labels

    from siamese.training.learn import LearnOptions, learn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="1000")
    ap.add_argument("specs", nargs="+", metavar="SET:SEED")
    args = ap.parse_args()
    for spec in args.specs:
        name, seed_text = spec.split(":")
        seed = int(seed_text)
        pool, _, _ = bench.load_set(name, 2000)
        rows = bench.labelled(pool, args.budget, seed)
        labels, rest = pool.subset(rows), bench.outside_labels(pool, rows)
        row: dict = {"set": name, "seed": seed, "labels": len(rows), "rest": len(rest)}
        for refit in (False, True):
            started = time.perf_counter()
            model = learn(labels, "minilm", options=LearnOptions(seed=seed, device="cpu", refit=refit))
            scored = bench.metrics(bench.cosines(model, rest), rest.labels, model.threshold)
            row[f"refit={refit}"] = {
                "accuracy": round(scored["accuracy"], 4),
                "roc_auc": round(scored["roc_auc"], 4),
                "chosen": model.info["learned"]["chosen"],
                "seconds": round(time.perf_counter() - started),
            }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
