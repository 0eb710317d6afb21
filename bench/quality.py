"""Quality of the Siamese LSTM trained on the shared data, next to a TF-IDF cosine baseline.

Trains on the duplicates of siamese.data.datasets.TRAIN, validates on VALIDATION, and tests on
BENCHMARKS, each test set with the threshold chosen on its own validation split (Quora: the
threshold chosen on VALIDATION during training). Prints a markdown table and writes JSON.

    .venv/bin/python bench/quality.py [--epochs 8] [--precision auto] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from siamese import TrainConfig, datasets, train
from siamese.evaluation.baselines import TfidfBaseline
from siamese.evaluation.metrics import benchmark, choose_threshold

HERE = Path(__file__).resolve().parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--precision", default="auto")
    p.add_argument("--threshold-metric", default="accuracy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=HERE / "results" / "quality.json")
    args = p.parse_args()

    train_pairs = datasets.load_many(datasets.TRAIN)
    val_pairs = datasets.load_many(datasets.VALIDATION)
    config = TrainConfig(
        epochs=args.epochs, precision=args.precision, seed=args.seed, threshold_metric=args.threshold_metric
    )
    model = train(train_pairs, val_pairs, config=config, progress=False)
    tfidf = TfidfBaseline().fit(train_pairs.text1 + train_pairs.text2)
    # TF-IDF has no training-time threshold: it gets the one chosen on the same validation mix.
    tfidf_threshold, _ = choose_threshold(
        tfidf.similarity_pairwise(val_pairs.text1, val_pairs.text2), val_pairs.labels, args.threshold_metric
    )
    results = {
        "siamese-lstm": benchmark(
            model.similarity_pairwise,
            datasets.BENCHMARKS,
            default_threshold=model.threshold,
            metric=args.threshold_metric,
        ),
        "tfidf-cosine": benchmark(
            tfidf.similarity_pairwise,
            datasets.BENCHMARKS,
            default_threshold=tfidf_threshold,
            metric=args.threshold_metric,
        ),
    }
    info = model.info["training"]
    summary = {
        "args": vars(args) | {"out": str(args.out)},
        "train_pairs": info["train_pairs"],
        "best_epoch": info["best_epoch"],
        "train_seconds": info["train_seconds"],
        "pairs_per_second": info["pairs_per_second"],
        "threshold": model.threshold,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")

    print(f"| model | {' | '.join(datasets.BENCHMARKS)} |")
    print("|---|" + "---|" * len(datasets.BENCHMARKS))
    for name, res in results.items():
        cells = []
        for r in res.values():
            cell = f"AUC {r['roc_auc']:.3f} · acc {r['accuracy']:.3f} · F1 {r['f1']:.3f}"
            if "spearman" in r:
                cell += f" · ρ {r['spearman']:.1f}"
            cells.append(cell)
        print(f"| {name} | {' | '.join(cells)} |")
    print(
        f"\ntrained {info['train_pairs']} pairs, best epoch {info['best_epoch']}, "
        f"{info['train_seconds']:.0f}s, threshold {model.threshold:.3f}"
    )


if __name__ == "__main__":
    main()
