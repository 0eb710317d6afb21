"""The public pair sets of a local data folder (``$SIAMESE_DATA``, default ``../shared/data``),
by name: ``load("msrp-test")``. Nothing is downloaded; files are read where they lie."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DataError
from .input_files import open_table
from .pairs import FORMATS, PairFormat, Pairs, read_pairs

# name -> (path under the data folder, format, rows of the 'split' column to keep or None)
CATALOGUE: dict[str, tuple[str, str | PairFormat, tuple[str, ...] | None]] = {
    "quora-sample": ("quora/quora_question_pairs_sample300.csv", "quora", None),
    "msrp-train": ("msrp/msr-para-train.tsv", "msrp", None),
    "msrp-val": ("msrp/msr-para-val.tsv", "msrp", None),
    "msrp-test": ("msrp/msr-para-test.tsv", "msrp", None),
    "paws-wiki-dev": ("paws/paws_wiki_dev.tsv", "paws", None),
    "paws-wiki-test": ("paws/paws_wiki_test.tsv", "paws", None),
    "paws-qqp-train": ("paws/paws_qqp_train.tsv", "paws", None),
    "paws-qqp-dev-test": ("paws/paws_qqp_dev_and_test.tsv", "paws", None),
    "twitter-url-train": ("twitter_url/train.csv", "twitter-url", None),
    "twitter-url-test": ("twitter_url/test.csv", "twitter-url", None),
    "sts-train": ("stsbenchmark/sts-train.csv", "sts", None),
    "sts-dev": ("stsbenchmark/sts-dev.csv", "sts", None),
    "sts-test": ("stsbenchmark/sts-test.csv", "sts", None),
    "sick-train": ("sick/SICK_train.txt", "sick", None),
    "sick-trial": ("sick/SICK_trial.txt", "sick", None),
    "sick-test": ("sick/SICK_test_annotated.txt", "sick", None),
    "semeval-train": ("semeval2016_cqa/subtaskB_pairs.csv", "semeval", ("train_part1", "train_part2")),
    "semeval-dev": ("semeval2016_cqa/subtaskB_pairs.csv", "semeval", ("dev",)),
    "mqp": ("mqp/mqp.csv", "mqp", None),
    "parasci-acl-train": ("parasci/acl_train.csv", "parasci", None),
    "parasci-acl-val": ("parasci/acl_val.csv", "parasci", None),
    "insuranceqa-pairs": (
        "insuranceqa/same_answer_pairs.csv",
        PairFormat("insuranceqa", "question1", "question2", label=None),
        None,
    ),
}


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data folder: ``root``, else ``$SIAMESE_DATA``, else ``../shared/data`` from the cwd."""
    return Path(root or os.environ.get("SIAMESE_DATA") or Path("..") / "shared" / "data").resolve()


def available(root: str | os.PathLike | None = None) -> bool:
    """Whether the shared data sets are in ``root`` (default: ``$SIAMESE_DATA``)."""
    return (data_root(root) / CATALOGUE["msrp-test"][0]).is_file()


def load(name: str, root: str | os.PathLike | None = None) -> Pairs:
    """The pair set ``name`` (one of :data:`CATALOGUE`), read from ``root``."""
    if name not in CATALOGUE:
        raise DataError(f"unknown data set {name!r}; choose one of: {', '.join(CATALOGUE)}")
    rel, fmt, splits = CATALOGUE[name]
    path = data_root(root) / rel
    if not path.is_file():
        raise DataError(f"{path}: not found (set SIAMESE_DATA to the folder holding the shared data sets)")
    pairs = read_pairs(path, fmt)
    pairs.source = name
    if splits is not None:
        keep = _split_lines(path, splits)
        pairs = pairs.subset(np.flatnonzero(np.isin(pairs.line_numbers, keep)))
    return pairs


def load_many(names: list[str], root: str | os.PathLike | None = None) -> Pairs:
    """Several pair sets as one."""
    return Pairs.concat([load(n, root) for n in names])


def validation_sets(root: str | os.PathLike | None = None) -> list[Pairs]:
    """The shared validation sets (:data:`VALIDATION`), one Pairs each."""
    if not data_root(root).is_dir():
        raise DataError(
            f"no validation pairs given and no shared data folder at {data_root(root)} "
            "(pass --val-data FILE, or set SIAMESE_DATA to the folder holding the shared data sets)"
        )
    return [load(name, root) for name in VALIDATION]


def _split_lines(path: Path, splits: tuple[str, ...]) -> np.ndarray:
    with open_table(path) as (header, rows):  # the same line numbers as the pair reader's
        split = header.index("split")
        return np.array([line for line, row in rows if row[split] in splits])


__all__ = ["CATALOGUE", "FORMATS", "available", "data_root", "load", "load_many", "validation_sets"]


# The duplicate-detection recipe used by `make demo` and bench/quality.py: train on the
# duplicates of these sets, validate on these, and test each benchmark with the threshold
# chosen on its own validation split (None: the threshold chosen on VALIDATION at training).
TRAIN = [
    "paws-qqp-train",
    "msrp-train",
    "twitter-url-train",
    "sts-train",
    "sick-train",
    "semeval-train",
    "parasci-acl-train",
    "insuranceqa-pairs",
]
VALIDATION = ["msrp-val", "sts-dev", "sick-trial"]
BENCHMARKS: dict[str, str | None] = {
    "msrp-test": "msrp-val",
    "paws-wiki-test": "paws-wiki-dev",
    "quora-sample": None,
    "sts-test": "sts-dev",
}
