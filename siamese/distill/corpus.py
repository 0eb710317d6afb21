"""The texts a student learns from: by default every text of the shared public pair sets that is
not in a test split (training and validation splits, InsuranceQA's non-test questions), or the
texts of the user's files (one text per line, or both texts of every pair of a pair file)."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import datasets
from ..errors import DataError

# Pair sets read for their texts only (labels unused). Test splits are left out on purpose: the
# student is measured on them (quora-sample, msrp-test, paws-wiki-test, sts-test, mqp, ...).
CORPUS_SETS = [*datasets.TRAIN, *datasets.VALIDATION, "paws-wiki-dev", "semeval-dev", "parasci-acl-val"]
INSURANCEQA_QUESTIONS = "insuranceqa/questions.csv"


def default_corpus(root: str | os.PathLike | None = None) -> list[str]:
    """Every distinct non-empty text of :data:`CORPUS_SETS` and InsuranceQA's train/valid
    questions, in first-seen order."""
    if not datasets.available(root):
        raise DataError(f"{datasets.data_root(root)}: the shared data sets are not there (give --data files, or set SIAMESE_DATA)")
    texts: dict[str, None] = {}
    for name in CORPUS_SETS:
        pairs = datasets.load(name, root)
        texts.update(dict.fromkeys(pairs.text1))
        texts.update(dict.fromkeys(pairs.text2))
    path = datasets.data_root(root) / INSURANCEQA_QUESTIONS
    with open(path, encoding="utf-8", newline="") as f:
        texts.update(dict.fromkeys(row["question"] for row in csv.DictReader(f) if row["split"] != "test"))
    return [t for t in texts if t.strip()]


def read_corpus(paths: Sequence[str | os.PathLike], *, column: str | None = None) -> list[str]:
    """Distinct texts of the given files: a pair file (any format :func:`siamese.data.read_pairs`
    recognises) gives both texts of each pair; a ``.txt`` file one text per line; a CSV/TSV with
    ``column`` that column."""
    from ..data import read_pairs, read_texts

    texts: dict[str, None] = {}
    for path in paths:
        path = Path(path)
        if path.suffix.lower() == ".txt" or column:
            texts.update(dict.fromkeys(read_texts(path, column)))
        else:
            pairs = read_pairs(path)
            texts.update(dict.fromkeys(pairs.text1))
            texts.update(dict.fromkeys(pairs.text2))
    return [t for t in texts if t.strip()]
