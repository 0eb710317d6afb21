"""Dedupe defaults on InsuranceQA (16,889 questions, and the first 3,000) with all-MiniLM-L6-v2: texts
in clusters, texts flagged (not kept), the biggest cluster, and how many of the 526 same-answer
question pairs end up in one cluster, for the old default (components at the model's pair threshold,
0.811) and the new (greedy clusters at 0.9), and in between. Exact neighbours (flat index, k=20).

    PYTHONPATH=. SIAMESE_DATA=../shared/data python bench/dedupe_defaults.py  # -> bench/results/dedupe_defaults.json
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from siamese import datasets
from siamese.models.sentence_encoder import from_pretrained
from siamese.search.pairs import clusters, duplicate_pairs

OUT = Path(__file__).parent / "results" / "dedupe_defaults.json"


def main() -> None:
    root = datasets.data_root()
    with open(root / "insuranceqa/questions.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(root / "insuranceqa/same_answer_pairs.csv", encoding="utf-8", newline="") as f:
        row_of = {r["qid"]: i for i, r in enumerate(rows)}
        gold = [(row_of[p["qid1"]], row_of[p["qid2"]]) for p in csv.DictReader(f)]
    vectors = from_pretrained("minilm").encode([r["question"] for r in rows], progress=True)
    results = []
    for n in (3000, len(rows)):
        candidates = duplicate_pairs(vectors[:n], 0.75, k=20, kind="flat")
        pairs_here = [(a, b) for a, b in gold if a < n and b < n]
        for threshold in (0.811, 0.85, 0.9, 0.95):
            for clustering in ("components", "greedy"):
                found = clusters(n, candidates.above(threshold), clustering)
                label = np.full(n, -1)
                for number, group in enumerate(found):
                    label[group] = number
                together = [label[a] >= 0 and label[a] == label[b] for a, b in pairs_here]
                results.append(
                    {
                        "texts": n,
                        "threshold": threshold,
                        "clustering": clustering,
                        "clusters": len(found),
                        "in_clusters": round(sum(map(len, found)) / n, 3),
                        "flagged": round(sum(len(g) - 1 for g in found) / n, 3),
                        "biggest_cluster": max(map(len, found), default=0),
                        "same_answer_pairs": len(pairs_here),
                        "same_answer_pairs_in_one_cluster": round(float(np.mean(together)), 3),
                    }
                )
                print(results[-1])
    OUT.write_text(json.dumps({"model": "all-MiniLM-L6-v2", "k": 20, "index": "flat", "rows": results}, indent=1))


if __name__ == "__main__":
    main()
