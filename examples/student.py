"""The fast student (guide: docs/guides/student.md): a static bag-of-words model distilled from
all-MiniLM-L6-v2, its vectors a sum of token vectors — many times faster than MiniLM on a CPU.

A SHORT distillation on a small corpus here (a few thousand STS-B sentences, one epoch, a narrow
table of the corpus's own words, not the teacher's 30,000 subwords), so it runs in about a minute;
`siamese distill --out runs/student` makes the real one (on the shared sets' texts, minutes).

Run: python examples/student.py [TEXTS]
"""

from __future__ import annotations

import sys

import siamese
from siamese import datasets
from siamese.distill import StaticConfig, distill_static

PAIRS = [
    ("When will I see you?", "When can I see you again?"),
    ("Do they enjoy eating the dessert?", "Do they like hiking in the desert?"),
]


def main(n: int = 3000) -> None:
    teacher = siamese.from_pretrained("minilm")
    sts = datasets.load("sts-train")
    corpus = list(dict.fromkeys(sts.text1 + sts.text2))[:n]
    config = StaticConfig(dim=64, epochs=1, vocabulary="words", max_vocab=5000, val_fraction=0.05)
    student = distill_static(teacher, corpus, config, progress=False)
    print(f"student distilled on {len(corpus):,} sentences: {student.dim}-d vectors")
    a, b = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    for (x, y), s, t in zip(PAIRS, student.similarity_pairwise(a, b), teacher.similarity_pairwise(a, b)):
        print(f"student {s:.3f}  MiniLM {t:.3f}  {x!r} / {y!r}")
    test = datasets.load("sts-test").subset(range(400))  # a slice: the example stays short
    for name, model in (("student", student), ("MiniLM", teacher)):
        print(f"{name}: ROC-AUC on 400 STS-B test pairs {siamese.evaluate(model, test)['roc_auc']:.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
