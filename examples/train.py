"""Training your own model on a file of labelled pairs (guide: docs/guides/training.md).

The seed's Siamese LSTM trained for a few epochs on MSRP's training pairs (a real CSV/TSV of
labelled pairs, read with its format detected), its threshold chosen on MSRP's validation pairs,
then evaluated on MSRP's test pairs and saved. The triplet loss (the default) learns from the
duplicate pairs; every other pair of a batch gives the negatives.

Run: python examples/train.py [EPOCHS] [OUT]   (default 2 epochs, runs/example-train)
"""

from __future__ import annotations

import sys

import siamese
from siamese import datasets


def main(epochs: int = 2, out: str = "runs/example-train") -> None:
    root = datasets.data_root()
    train_pairs = siamese.read_pairs(root / "msrp" / "msr-para-train.tsv")  # your pairs file here
    val_pairs = siamese.read_pairs(root / "msrp" / "msr-para-val.tsv")
    model = siamese.train(train_pairs, val_pairs, config=siamese.TrainConfig(epochs=epochs), progress=False)
    print(f"trained on {len(train_pairs):,} pairs; threshold {model.threshold:.3f} chosen on {len(val_pairs)} pairs")
    metrics = siamese.evaluate(model, siamese.read_pairs(root / "msrp" / "msr-para-test.tsv"))
    print(f"MSRP test: ROC-AUC {metrics['roc_auc']:.3f}, accuracy {metrics['accuracy']:.3f}, F1 {metrics['f1']:.3f}")
    model.save(out)
    print(f'saved to {out}: try `siamese predict {out} "..." "..."`')


if __name__ == "__main__":
    main(*(int(sys.argv[1]),) if len(sys.argv) > 1 else (), *sys.argv[2:3])
