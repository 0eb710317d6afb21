"""Does a larger distillation corpus move the static student? The default corpus (every text of the
shared pair sets outside test and selection splits) against the same plus the shared sets' other
real unlabelled texts: SimpleQuestions valid questions, TrecQA and WikiQA train questions and
answer sentences, ParaSCI-arXiv val sentences (nothing from a test split, nothing of
``HELD_OUT_SETS``). One teacher object, the same StaticConfig; validation sets and the Quora sample.

    .venv/bin/python bench/static_corpus.py      # ~22 min on an AVX2-only 2-core CPU; writes results/static_corpus.json
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from siamese import datasets
from siamese.distill.corpus import HELD_OUT_SETS, default_corpus
from siamese.distill.pipeline import distill
from siamese.evaluation import evaluate
from siamese.teachers import load_teacher

HERE = Path(__file__).resolve().parent
SETS = ["msrp-val", "sts-dev", "semeval-dev", "quora-sample", "sts-test"]


def column(path: Path, *names: str) -> list[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return [row[n] for row in csv.DictReader(f) for n in names]


def other_texts(root: Path) -> list[str]:
    texts = column(root / "simplequestions/valid.csv", "question") + column(root / "trecqa/train.csv", "qtext", "atext")
    texts += column(root / "parasci/arxiv_val.csv", "sentence1", "sentence2")
    for side in ("a.toks", "b.toks"):
        texts += (root / "wikiqa/train" / side).read_text(encoding="utf-8").splitlines()
    return texts


def scores(model, sets=SETS) -> dict:
    """ROC-AUC of each labelled set, Spearman ×100 of each graded one."""
    out = {}
    for name in sets:
        pairs = datasets.load(name)
        metrics = evaluate(model, pairs)
        out[name] = round(metrics["spearman"], 1) if pairs.scores is not None else round(metrics["roc_auc"], 3)
    return out


def main() -> None:
    base = default_corpus()
    held_out = {t for name in HELD_OUT_SETS for p in [datasets.load(name)] for t in (*p.text1, *p.text2)}
    skip = set(base) | held_out
    more = [t for t in dict.fromkeys(other_texts(datasets.data_root())) if t.strip() and t not in skip]
    teacher, _ = load_teacher("minilm", max_length=128)
    result = {}
    for name, corpus in (("default", base), ("default + other texts", base + more)):
        result[name] = {"texts": len(corpus), **scores(distill(teacher, corpus, progress=False))}
        print(name, result[name], flush=True)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "static_corpus.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
