"""Duplicate detection with a pretrained model (guide: docs/guides/duplicates.md).

all-MiniLM-L6-v2 (the minilm extra) as a Siamese model, its threshold chosen on the
shared validation pairs, judging a few pairs.

Run: python examples/duplicates.py [VALIDATION_SET ...]   (default: msrp-val sts-dev sick-trial)
"""

from __future__ import annotations

import sys

import siamese
from siamese import datasets

PAIRS = [
    ("When will I see you?", "When can I see you again?"),
    ("Do they enjoy eating the dessert?", "Do they like hiking in the desert?"),
    ("How do I reset my password?", "I forgot my password, how can I change it?"),
    ("What is the capital of France?", "What is the population of France?"),
]


def main(names: list[str]) -> None:
    validation = [datasets.load(name) for name in names]  # labelled pairs ($SIAMESE_DATA) choose the threshold
    model = siamese.from_pretrained("minilm", validation, metric="f1")
    print(f"threshold {model.threshold:.3f} (best F1 on {sum(map(len, validation)):,} validation pairs)")
    similarities = model.similarity_pairwise([a for a, _ in PAIRS], [b for _, b in PAIRS])
    for (a, b), similarity, duplicate in zip(PAIRS, similarities, model.predict(PAIRS)):
        print(f"{similarity:.3f} {'duplicate    ' if duplicate else 'not duplicate'}  {a!r} / {b!r}")


if __name__ == "__main__":
    main(sys.argv[1:] or datasets.VALIDATION)
