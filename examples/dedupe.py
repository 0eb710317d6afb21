"""De-duplicating a corpus in one call (guide: docs/guides/dedupe.md).

1,000 InsuranceQA questions ($SIAMESE_DATA) grouped with all-MiniLM-L6-v2: each cluster is a kept
question and its paraphrases (cosine above 0.9 to it). Run: python examples/dedupe.py [N]
"""

from __future__ import annotations

import sys

import siamese
from siamese import datasets


def main(n: int = 1000) -> None:
    questions = siamese.read_texts(datasets.data_root() / "insuranceqa" / "questions.csv", "question")[:n]
    found = siamese.dedupe(questions)  # model=None: all-MiniLM-L6-v2
    print(f"{len(questions):,} questions: {len(found.kept):,} kept, {found.removed:,} paraphrases of a kept one")
    for cluster in found.clusters[:3]:
        print(f"\nkept: {cluster.kept.text}")
        for duplicate in cluster.duplicates[:3]:
            print(f"  {duplicate.similarity:.3f}  {duplicate.record.text}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
