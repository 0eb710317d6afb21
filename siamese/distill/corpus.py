"""The texts a student learns from: by default every text of the shared public pair sets that is
not in a test split (training and validation splits, InsuranceQA's non-test questions), or the
texts of the user's files (one text per line, or both texts of every pair of a pair file)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..data import datasets
from ..data.input_files import open_table
from ..errors import DataError

# Pair sets read for their texts only (labels unused). Test splits are left out on purpose: the
# student is measured on them (quora-sample, msrp-test, paws-wiki-test, sts-test, mqp, ...); so
# are msrp-val, sts-dev and semeval-dev, which the threshold and the recipe were chosen on.
CORPUS_SETS = [*datasets.TRAIN, "sick-trial", "paws-wiki-dev", "parasci-acl-val"]
# Sets whose texts are kept out even where a training set holds them too (STS-B test reuses ~500
# MSRP and news sentences, for instance): the student never sees the teacher's vector of a text
# it is measured or tuned on.
HELD_OUT_SETS = [
    "quora-sample",
    "msrp-test",
    "paws-wiki-test",
    "paws-qqp-dev-test",
    "twitter-url-test",
    "sts-test",
    "sick-test",
    "mqp",
    "msrp-val",
    "sts-dev",
    "semeval-dev",
]
INSURANCEQA_QUESTIONS = "insuranceqa/questions.csv"


def default_corpus(root: str | os.PathLike | None = None) -> list[str]:
    """Every distinct non-empty text of :data:`CORPUS_SETS` and InsuranceQA's train/valid
    questions, in first-seen order, less every text of :data:`HELD_OUT_SETS`."""
    if not datasets.available(root):
        raise DataError(
            f"{datasets.data_root(root)}: the shared data sets are not there (give --data files, or set SIAMESE_DATA)"
        )
    texts: dict[str, None] = {}
    for name in CORPUS_SETS:
        pairs = datasets.load(name, root)
        texts.update(dict.fromkeys(pairs.text1))
        texts.update(dict.fromkeys(pairs.text2))
    path = datasets.data_root(root) / INSURANCEQA_QUESTIONS
    with open_table(path) as (header, rows):
        question, split = header.index("question"), header.index("split")
        texts.update(dict.fromkeys(row[question] for _, row in rows if row[split] != "test"))
    held_out = {t for name in HELD_OUT_SETS for p in [datasets.load(name, root)] for t in (*p.text1, *p.text2)}
    return [t for t in texts if t.strip() and t not in held_out]


def read_corpus(paths: Sequence[str | os.PathLike], *, column: str | None = None) -> list[str]:
    """Distinct texts of the given files: a pair file (any format :func:`siamese.data.pairs.read_pairs`
    recognises) gives both texts of each pair; a ``.txt`` file one text per line; a CSV/TSV with
    ``column`` that column."""
    from ..data.pairs import read_pairs, read_texts

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
