"""Duplicate search (guide: docs/guides/search.md): index questions once, then find the nearest
ones to a new question, each with its similarity and a duplicate verdict.

Run: python examples/search.py [N]   (N InsuranceQA questions from $SIAMESE_DATA, default 2,000)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import siamese
from siamese import datasets
from siamese.search import DuplicateIndex


def main(n: int = 2000) -> None:
    model = siamese.from_pretrained("minilm")
    model.set_threshold(0.9)  # the verdict: nearly the same question
    questions = siamese.read_texts(datasets.data_root() / "insuranceqa" / "questions.csv", "question")[:n]
    index = DuplicateIndex(model)  # exact FAISS search; kind="hnsw" for large corpora
    index.add(questions)
    with tempfile.TemporaryDirectory() as tmp:
        index.save(Path(tmp) / "index")  # the CLI's `siamese search FOLDER "..."` opens the same folder
        index = DuplicateIndex.load(Path(tmp) / "index", model)
        for hit in index.search(["How much does renters insurance cost?"], k=5)[0]:
            print(f"{hit.similarity:.3f} {'duplicate' if hit.duplicate else '         '}  [{hit.id}] {hit.text}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
