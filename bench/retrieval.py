"""Retrieval quality: find each question's known duplicate among all the questions of a set.

    make demo   # trains runs/demo-model
    .venv/bin/python bench/retrieval.py --model runs/demo-model

Sets: InsuranceQA (526 same-answer pairs, searched among all 16,889 questions), the Quora
sample's 113 duplicate pairs (among its 600 questions), MQP's 1,524 duplicate pairs (among its
questions). Exact (flat) search; recall@1/5/10 and MRR@10, next to TF-IDF cosine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from siamese import SiameseModel, datasets, read_texts
from siamese.baselines import TfidfBaseline
from siamese.search import DuplicateIndex, retrieval_metrics

HERE = Path(__file__).resolve().parent


def tfidf_metrics(queries, targets, corpus):
    vec = TfidfBaseline().fit(corpus).vectorizer  # rows are L2-normalised: dot product = cosine
    sims = (vec.transform(queries) @ vec.transform(corpus).T).toarray()
    pos = {t: i for i, t in enumerate(corpus)}
    ranks = []
    for row, (q, t) in enumerate(zip(queries, targets)):
        sims[row, pos[q]] = -np.inf
        order = np.argsort(-sims[row])[:10]
        ranks.append(next((k + 1 for k, j in enumerate(order) if corpus[j] == t), None))
    n = len(ranks)
    out = {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / n for k in (1, 5, 10)}
    out["mrr@10"] = sum(1 / r for r in ranks if r is not None) / n
    return out


def sets(root):
    iqa = datasets.load("insuranceqa-pairs", root)
    yield (
        "insuranceqa",
        iqa.text1,
        iqa.text2,
        read_texts(datasets.data_root(root) / "insuranceqa/questions.csv", "question"),
    )
    for name in ("quora-sample", "mqp"):
        p = datasets.load(name, root)
        dup = p.positives()
        yield name, dup.text1, dup.text2, sorted(set(p.text1 + p.text2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "retrieval.json")
    args = ap.parse_args()
    model = SiameseModel.load(args.model)
    results = {}
    for name, queries, targets, corpus in sets(None):
        corpus = sorted(set(corpus) | set(queries) | set(targets))
        t0 = time.perf_counter()
        index = DuplicateIndex(model)
        index.add(corpus)
        ours = retrieval_metrics(index, queries, targets)
        results[name] = {
            "corpus": len(corpus),
            "siamese": ours,
            "tfidf": tfidf_metrics(queries, targets, corpus),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        print(name, json.dumps(results[name]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
