"""How should a threshold be set from a few labels? MiniLM as it is on bench-learn's six sets: at
each budget and seed, bench-learn's labels (the first B pool pairs of seed s's permutation) choose a
threshold by each rule, scored on every other pool pair (never the test split). Rules:

* ``best cut``: the accuracy-maximising cut on the labels (:func:`choose_threshold`);
* ``platt``: where a Platt fit of P(duplicate | cosine) on the labels crosses 1/2;
* ``fit_threshold``: the Platt cut unless it is more than 5 points less accurate on the labels than
  the best cut (:func:`fit_threshold`, what ``siamese train --from`` uses);
* ``oracle``: the best cut on the scored pairs themselves (the ceiling of any rule).

One JSON line per set and budget, mean accuracy over the seeds:

    python bench/threshold_selection.py --seeds 30 > bench/results/threshold-selection.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    import learn as bench  # bench/learn.py: the same sets, pools and labels

    from siamese.decision.threshold import choose_threshold, fit_threshold, platt
    from siamese.models.sentence_encoder import from_pretrained

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=list(bench.SETS))
    ap.add_argument("--budgets", nargs="+", default=["50", "100", "200", "500"])
    ap.add_argument("--seeds", type=int, default=30)
    args = ap.parse_args()

    def platt_cut(s, y) -> float:
        a, b = platt(s, y)
        return -b / a

    rules = {
        "best cut": lambda s, y: choose_threshold(s, y)[0],
        "platt": platt_cut,
        "fit_threshold": lambda s, y: fit_threshold(s, y)[0],
    }
    base = from_pretrained("minilm")
    for name in args.sets:
        pool, _, _ = bench.load_set(name, 2000)
        cos, y = bench.cosines(base, pool), np.asarray(pool.labels, bool)
        for budget in args.budgets:
            scored: dict[str, list[float]] = {rule: [] for rule in [*rules, "oracle"]}
            for seed in range(args.seeds):
                rows = bench.labelled(pool, budget, seed)
                if len(set(y[rows].tolist())) < 2:
                    continue
                rest = np.setdiff1d(np.arange(len(pool)), rows)
                for rule, cut in [*rules.items(), ("oracle", None)]:
                    t = choose_threshold(cos[rest], y[rest])[0] if cut is None else cut(cos[rows], y[rows])
                    scored[rule].append(float(np.mean((cos[rest] > t) == y[rest])))
            means = {rule: round(float(np.mean(v)), 4) for rule, v in scored.items()}
            print(json.dumps({"set": name, "labels": int(budget), "seeds": len(scored["oracle"]), **means}), flush=True)


if __name__ == "__main__":
    main()
