"""How well a calibrator fitted on the shared Quora sample turns all-MiniLM-L6-v2's cosine into a
duplicate probability, and how much of the measured ECE is the estimator's own noise.

Only 300 Quora pairs are shared, so the ECE on "other Quora pairs" is estimated by cross-fitting:
for each of ``--repeats`` shuffles, 5 folds; each pair gets the probability of a calibrator fitted
on the other four folds (``siamese.decision.calibration.cross_fitted``, the code ``siamese calibrate``
chooses with), and the ECE (10 equal-width bins) is taken over all 300 out-of-fold probabilities.

An ECE measured on n pairs is above zero even for a perfectly calibrated model: with labels drawn
from the probabilities themselves, the 10-bin ECE of 300 pairs is about 0.05, of 700 (the pairs
kept back) about 0.03. The script prints that floor beside the measured ECE, so the number is
read against what a perfect calibrator would show on the same data.

    .venv/bin/python bench/calibration.py [--model minilm] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from siamese import datasets
from siamese.decision.calibration import cross_fitted, expected_calibration_error
from siamese.models.sentence_encoder import sentence_encoder

HERE = Path(__file__).resolve().parent


def floor(probs: np.ndarray, n: int, rng: np.random.Generator, draws: int = 200) -> float:
    """Median 10-bin ECE of n pairs whose labels are drawn from ``probs`` (perfect calibration)."""
    values = []
    for _ in range(draws):
        p = rng.choice(probs, n)
        values.append(expected_calibration_error(p, (rng.random(n) < p).astype(int)))
    return float(np.median(values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="minilm, mpnet or a sentence-transformers folder")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    model, _ = sentence_encoder(args.model)
    pairs = datasets.load("quora-sample")
    scores, labels = model.similarity_pairwise(pairs.text1, pairs.text2), pairs.labels.astype(int)
    rng = np.random.default_rng(0)
    result = {
        "model": args.model,
        "pairs": len(labels),
        "repeats": args.repeats,
        "ece_cosine_as_probability": round(expected_calibration_error(np.clip(scores, 0, 1), labels), 4),
    }
    for method in ("auto", "platt", "isotonic", "blend"):
        eces, floors = [], []
        for seed in range(args.repeats):
            probs = cross_fitted(scores, labels, method, seed=seed)
            eces.append(expected_calibration_error(probs, labels))
            floors.append(floor(probs, len(labels), rng, draws=50))
        result[method] = {
            "ece_median": round(float(np.median(eces)), 4),
            "ece_min": round(min(eces), 4),
            "ece_max": round(max(eces), 4),
            "floor_300_median": round(float(np.median(floors)), 4),
        }
    result["floor_700"] = round(floor(cross_fitted(scores, labels, "auto"), 700, rng), 4)
    print(json.dumps(result, indent=1))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "calibration.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
