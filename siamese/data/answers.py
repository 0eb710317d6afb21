"""Answer selection (the "SQAM" of Feng et al. 2015): rank a question's candidate answers.

Data: TrecQA (CSV ``qtext,label,atext``) and WikiQA (a folder of aligned ``a.toks``, ``b.toks``,
``sim.txt``, ``id.txt``), read into one :class:`Question` per question. Training uses
(question, right answer, wrong answer) :class:`Triplets` with the hinge loss; evaluation reports
MAP and MRR over the questions that have both a right and a wrong candidate (the standard
protocol on both sets).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score

from ..errors import DataError
from .datasets import data_root
from .input_files import check_utf8, open_table, open_text

ANSWER_SETS = {
    f"{name}-{split}": (folder, split)
    for name, folder in (("trecqa", "trecqa"), ("wikiqa", "wikiqa"))
    for split in ("train", "dev", "test")
}


@dataclass
class Question:
    text: str
    answers: list[str]
    labels: np.ndarray  # 1 = a right answer


@dataclass
class Triplets:
    """Aligned (anchor, positive, negative) texts: the training data of answer selection."""

    anchor: list[str]
    positive: list[str]
    negative: list[str]
    source: str = ""
    labels = None  # the training-data contract of siamese.data.pairs.Pairs: no labels, weights or scores
    weights = None
    triplets = True

    def __len__(self) -> int:
        return len(self.anchor)

    def sides(self) -> list[list[str]]:
        """The aligned texts a model encodes: (anchor, positive, negative)."""
        return [self.anchor, self.positive, self.negative]


def read_trecqa(path: str | os.PathLike) -> list[Question]:
    """TrecQA CSV ``qtext,label,atext``; rows of one question are grouped by its text."""
    path = Path(path)
    groups: dict[str, tuple[list[str], list[int]]] = {}
    with open_table(path) as (header, rows):
        missing = {"qtext", "label", "atext"} - set(header)
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(sorted(missing))} (expected qtext,label,atext)")
        q, y, a = (header.index(c) for c in ("qtext", "label", "atext"))
        for line, row in rows:
            label = row[y].strip()
            if label not in ("0", "1"):
                raise DataError(f"{path}:{line}: column label: expected 0 or 1, got {label!r}")
            for column in (q, a):
                check_utf8(row[column], path, line, header[column])
            answers, labels = groups.setdefault(row[q], ([], []))
            answers.append(row[a])
            labels.append(int(label))
    return [Question(q, a, np.array(labels, dtype=np.int8)) for q, (a, labels) in groups.items()]


def read_wikiqa(folder: str | os.PathLike) -> list[Question]:
    """A WikiQA split folder: line i of a.toks/b.toks/sim.txt/id.txt is one candidate."""
    folder = Path(folder)
    columns = {}
    for name in ("a.toks", "b.toks", "sim.txt", "id.txt"):
        if not (folder / name).exists():
            raise DataError(f"{folder / name}: not found (a WikiQA folder holds a.toks, b.toks, sim.txt, id.txt)")
        with open_text(folder / name) as f:
            columns[name] = f.read().splitlines()
        for i, text in enumerate(columns[name], 1):
            check_utf8(text, folder / name, i, name)
    sizes = {len(v) for v in columns.values()}
    if len(sizes) != 1:
        raise DataError(f"{folder}: a.toks, b.toks, sim.txt and id.txt have different line counts")
    groups: dict[str, tuple[str, list[str], list[int]]] = {}
    for i, (q, a, sim, qid) in enumerate(zip(*columns.values()), 1):
        if sim not in ("0", "1"):
            raise DataError(f"{folder / 'sim.txt'}:{i}: expected 0 or 1, got {sim!r}")
        _, answers, labels = groups.setdefault(qid, (q, [], []))
        answers.append(a)
        labels.append(int(sim))
    return [Question(q, a, np.array(labels, dtype=np.int8)) for q, a, labels in groups.values()]


def read_answers(path: str | os.PathLike) -> list[Question]:
    """A TrecQA-style CSV or a WikiQA-style folder."""
    path = Path(path)
    return read_wikiqa(path) if path.is_dir() else read_trecqa(path)


def load_answers(name: str, root: str | os.PathLike | None = None) -> list[Question]:
    """A shared answer-selection split by name: ``trecqa-test``, ``wikiqa-train``, …"""
    if name not in ANSWER_SETS:
        raise DataError(f"unknown answer set {name!r}; choose one of: {', '.join(ANSWER_SETS)}")
    folder, split = ANSWER_SETS[name]
    base = data_root(root) / folder
    return read_trecqa(base / f"{split}.csv") if folder == "trecqa" else read_wikiqa(base / split)


def make_triplets(questions: Sequence[Question], *, negatives: int = 5, seed: int = 0, source: str = "") -> Triplets:
    """For every right answer, ``negatives`` wrong answers of the same question drawn at random
    (all of them when it has fewer): one (question, right, wrong) triplet each."""
    rng = np.random.default_rng(seed)
    anchor, positive, negative = [], [], []
    for q in questions:
        right = [a for a, y in zip(q.answers, q.labels) if y == 1]
        wrong = [a for a, y in zip(q.answers, q.labels) if y == 0]
        if not right or not wrong:
            continue
        for a in right:
            for i in rng.permutation(len(wrong))[:negatives]:
                anchor.append(q.text)
                positive.append(a)
                negative.append(wrong[i])
    if not anchor:
        raise DataError(f"{source or 'answer set'}: no question has both a right and a wrong answer")
    return Triplets(anchor, positive, negative, source)


def rank(model, question: str, candidates: Sequence[str]) -> list[tuple[int, float]]:
    """Candidates' (index, score), best first."""
    if not candidates:
        return []
    scores = model.similarity_pairwise([question] * len(candidates), list(candidates))
    order = np.argsort(-scores, kind="stable")
    return [(int(i), float(scores[i])) for i in order]


def ranking_report(score_questions, questions: Sequence[Question]) -> dict:
    """MAP and MRR of ``score_questions(questions_texts, answers_texts) -> scores`` (one score per
    candidate) over the questions with both a right and a wrong candidate."""
    kept = [q for q in questions if 0 < q.labels.sum() < len(q.labels)]
    if not kept:
        raise DataError("no question has both a right and a wrong candidate to rank")
    q_texts = [q.text for q in kept for _ in q.answers]
    a_texts = [a for q in kept for a in q.answers]
    scores = np.asarray(score_questions(q_texts, a_texts), dtype=np.float64)
    aps, rrs, start = [], [], 0
    for q in kept:
        s = scores[start : start + len(q.answers)]
        start += len(q.answers)
        aps.append(average_precision_score(q.labels, s))
        order = np.argsort(-s, kind="stable")
        rrs.append(1.0 / (1 + int(np.flatnonzero(q.labels[order] == 1)[0])))
    return {"map": float(np.mean(aps)), "mrr": float(np.mean(rrs)), "questions": len(kept), "candidates": len(a_texts)}
