"""How many more pairs do a user's labels imply? The issue's recipe list names "more pairs implied by
the labels (transitivity within duplicate groups)": if A~B and B~C are duplicates, A~C is one; if
A~B is a duplicate and B/D is not, A/D is not. Counted on bench-learn's labels (bench/learn.py: the
same sets, pools and seeded draws) per set, budget and seed; no model is loaded.

    python bench/learn_implied_pairs.py --budgets 200 1000 --seeds 5 > bench/results/learn-implied-pairs.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

SETS = ("mqp", "semeval-cqa", "twitter-url", "msrp", "paws-qqp", "sick")


def implied(text1: list[str], text2: list[str], labels: np.ndarray) -> tuple[int, int]:
    """(duplicates, non-duplicates) the labels imply and do not already hold."""
    parent: dict[str, str] = {}

    def root(t: str) -> str:
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    for a, b, y in zip(text1, text2, labels):
        ra, rb = root(a), root(b)
        if y == 1:
            parent[ra] = rb
    groups: dict[str, list[str]] = {}
    for t in list(parent):
        groups.setdefault(root(t), []).append(t)
    labelled = {frozenset(p) for p in zip(text1, text2)}
    duplicates = sum(1 for g in groups.values() for p in itertools.combinations(g, 2) if frozenset(p) not in labelled)
    apart = {
        frozenset(p)
        for a, b, y in zip(text1, text2, labels)
        if y == 0
        for p in itertools.product(groups[root(a)], groups[root(b)])
        if frozenset(p) not in labelled
    }
    return duplicates, len(apart)


def main() -> None:
    import learn as bench

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--budgets", nargs="+", default=["200", "1000"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="one JSON line per set, budget and seed instead of a table")
    args = ap.parse_args()
    if not args.json:
        print("| set | labels | implied duplicates: mean (max) | implied non-duplicates: mean (max) |")
        print("|---|---:|---|---|")
    for name in args.sets:
        pool, _, _ = bench.load_set(name, 2000)
        for budget in args.budgets:
            counts = []
            for seed in range(args.seeds):
                labels = pool.subset(bench.consistent(pool, bench.labelled(pool, budget, seed)))
                counts.append(implied(labels.text1, labels.text2, np.asarray(labels.labels)))
                if args.json:
                    print(json.dumps({"set": name, "budget": budget, "seed": seed, "labels": len(labels),
                                      "duplicates": counts[-1][0], "non_duplicates": counts[-1][1]}))  # fmt: skip
            if not args.json:
                pos, neg = np.array(counts).T
                print(f"| {name} | {budget} | {pos.mean():.0f} ({pos.max()}) | {neg.mean():.0f} ({neg.max()}) |")


if __name__ == "__main__":
    main()
