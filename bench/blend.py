"""Does a cross-encoder add to the bi-encoders' verdict? Score every pair of the zoo's test sets
with all-mpnet-base-v2's cosine, all-MiniLM-L6-v2's cosine and a cross-encoder's logit, fit a
logistic regression on each combination over the validation mix (siamese.datasets.VALIDATION:
MSRP val + STS-B dev + SICK trial; never a test set), and report each blend's ROC-AUC per test set.

    SIAMESE_DATA=../shared/data .venv/bin/python bench/blend.py --cross runs/zoo/cross-encoder-paws-wiki \\
        --cache runs/blend_scores.json      # ~27 min on 2 AVX2 cores (mpnet on PAWS-Wiki's 16,000 texts)

``--cache`` keeps the raw scores, so the fits can be re-read without re-scoring. Writes
bench/results/blend.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from siamese import datasets
from siamese.cross import CrossEncoder
from siamese.sentence_encoder import from_pretrained

HERE = Path(__file__).resolve().parent
TESTS = ["quora-sample", "msrp-test", "paws-wiki-test", "sts-test", "semeval-dev", "mqp"]
COMBINATIONS = [
    ["mpnet"],
    ["minilm"],
    ["cross"],
    ["mpnet", "minilm"],
    ["mpnet", "cross"],
    ["minilm", "cross"],
    ["mpnet", "minilm", "cross"],
]


def score_all(cross_folder: Path) -> dict:
    """{set: {"mpnet": [...], "minilm": [...], "cross": [...], "labels": [...]}} for the tests and "val"."""
    root = datasets.data_root()
    val = datasets.load_many(datasets.VALIDATION, root)
    sets = {name: datasets.load(name, root) for name in TESTS} | {"val": val}
    mpnet, minilm = from_pretrained("mpnet", [val]), from_pretrained("minilm", [val])
    cross = CrossEncoder.load(cross_folder)
    scores = {}
    for name, pairs in sets.items():
        scores[name] = {
            "mpnet": mpnet.similarity(pairs.text1, pairs.text2).tolist(),
            "minilm": minilm.similarity(pairs.text1, pairs.text2).tolist(),
            "cross": cross.logits(pairs.text1, pairs.text2).tolist(),
            "labels": np.asarray(pairs.labels).tolist(),
        }
        print(f"scored {name}: {len(pairs)} pairs", flush=True)
    return scores


def features(scores: dict, names: list[str]) -> np.ndarray:
    return np.column_stack([np.asarray(scores[n], dtype=np.float64) for n in names])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cross", type=Path, required=True, help="a cross-encoder folder (siamese train --cross)")
    p.add_argument("--cache", type=Path, help="raw scores: read if present, else written")
    p.add_argument("--out", type=Path, default=HERE / "results" / "blend.json")
    args = p.parse_args()
    if args.cache and args.cache.is_file():
        scores = json.loads(args.cache.read_text())
    else:
        scores = score_all(args.cross)
        if args.cache:
            args.cache.write_text(json.dumps(scores))
    val = scores["val"]
    rows = []
    print("blend", "weights", *TESTS, sep="\t")
    for names in COMBINATIONS:
        fit = LogisticRegression().fit(features(val, names), np.asarray(val["labels"]))
        aucs = {
            t: round(float(roc_auc_score(scores[t]["labels"], fit.decision_function(features(scores[t], names)))), 4)
            for t in TESTS
        }
        rows.append({"blend": "+".join(names), "weights": [round(float(w), 3) for w in fit.coef_[0]], "roc_auc": aucs})
        print(rows[-1]["blend"], rows[-1]["weights"], *(f"{aucs[t]:.3f}" for t in TESTS), sep="\t")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"cross": str(args.cross), "fitted_on": datasets.VALIDATION, "rows": rows}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
