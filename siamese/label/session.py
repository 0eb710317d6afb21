"""One labelling session: the candidates, the labels file, the choice of the next pair, the
statistics and the save. The web app (app.py) and the oracle replay both drive it; every call
holds one lock, so answers from several tabs are taken one at a time."""

from __future__ import annotations

import math
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..data.pairs import column_list, parse_label
from ..errors import ConfigError, DataError
from . import stats
from .selection import Candidates, Selector, corpus_candidates, pair_candidates
from .store import LabelStore, answer, pair_key

# The half-width of the band asked about around a learned model's threshold, until answers given
# since the learn fit one (cosines of a fine-tuned MiniLM move ~0.05 per step of doubt).
LEARNED_WIDTH = 0.05
RESERVE_SECONDS = 600.0  # a pair shown in one tab is not shown in another for this long
# At most this many pairs are held for tabs at once (the oldest shown is let go first): a page
# asking for pairs under ever new tab names cannot hold the whole queue.
MAX_RESERVED = 16


class LabelSession:
    def __init__(
        self,
        model,
        candidates: Candidates,
        store: LabelStore,
        *,
        save_to: Path | None = None,
        target_precision: float = 0.9,
        strategy: str = "active",
        seed: int = 0,
        source: str = "",
    ):
        if not len(candidates):
            raise DataError(f"{source or 'the data'}: no candidate pairs to label")
        if not 0 < target_precision < 1:
            raise ConfigError(f"target precision must be in (0, 1), got {target_precision}")
        self.model, self.c, self.store, self.save_to = model, candidates, store, save_to
        self.model_threshold = float(model.threshold)
        self.target_precision = target_precision
        self.selector = Selector(candidates, strategy=strategy, seed=seed)
        self.seed = seed
        self.source = source
        self.from_pairs = False  # the candidates are a pair file's (not a corpus's nearest pairs)
        self.index_of = {pair_key(*candidates.pair(n)): n for n in range(len(candidates))}
        self.skipped: set[int] = set()
        self.reserved: dict[int, tuple[str, float]] = {}  # candidate -> (tab, when shown)
        self.answered_by: dict[str, list[tuple[str, str]]] = {}  # tab -> the pairs it answered, in order
        self.lock = threading.RLock()
        self._stats: dict | None = None
        self._seen = -1
        self.learned_keys: set[tuple[str, str]] = set()  # the answers the current model learned from
        self.rescored = False  # the candidates were scored again by a learned model (stored similarities are stale)
        self.learner = None  # a .learning.Learner when the page may learn from the answers

    # -- what the answers say -----------------------------------------------------------------------

    def _answered(self) -> tuple[list[int], np.ndarray, np.ndarray]:
        """The answered candidates (in order), and the similarity and label of every answer the
        current model did not learn from (all of them until the page learned)."""
        self.store.refresh()
        done, sims, labels = [], [], []
        for a in self.store.answers:
            n = self.index_of.get(a.key)
            if n is not None:
                done.append(n)
            if a.key in self.learned_keys:
                continue
            s = self.c.similarity[n] if n is not None else (math.nan if self.rescored else a.similarity)
            if not math.isnan(s):
                sims.append(s)
                labels.append(a.label)
        return done, np.array(sims, dtype=np.float64), np.array(labels, dtype=np.int64)

    def stats(self) -> dict:
        with self.lock:
            _, sims, labels = self._answered()
            if self._stats is None or self._seen != self.store.version():
                self._stats = stats.summary(
                    sims,
                    labels,
                    self.c.similarity,
                    model_threshold=self.model_threshold,
                    target_precision=self.target_precision,
                )
                self._stats["learned_on"] = len(self.learned_keys)
                self._seen = self.store.version()
            return self._stats

    def threshold(self) -> float:
        """The threshold fitted on the answers so far (the model's until both labels were given):
        the statistics' when they are up to date, else the quick Platt crossing."""
        with self.lock:
            _, sims, labels = self._answered()
            if self._stats is not None and self._seen == self.store.version():
                t = self._stats["threshold"]
            else:
                t = stats.threshold(sims, labels)[0]
            return self.model_threshold if t is None else t

    # -- the loop -----------------------------------------------------------------------------------

    def next(self, tab: str = "") -> dict | None:
        """The pair to show ``tab``: the one it was shown and has not answered, else a new choice."""
        with self.lock:
            done, sims, labels = self._answered()
            now, answered = time.monotonic(), set(done)
            self.reserved = {
                n: (who, when)
                for n, (who, when) in self.reserved.items()
                if now - when < RESERVE_SECONDS and n not in answered
            }
            mine = [n for n, (who, _) in self.reserved.items() if who == tab]
            if mine:
                return self.show(mine[0])
            unavailable = np.zeros(len(self.c), bool)
            unavailable[done] = True
            unavailable[list(self.skipped | set(self.reserved))] = True
            t, width = stats.threshold(sims, labels)
            if t is None and self.learned_keys:  # since the learn, no answers of both kinds yet
                t, width = self.model_threshold, LEARNED_WIDTH
            n = self.selector.choose(done, unavailable, t, width)
            if n is None:
                return None
            self._reserve(n, tab, now)
            return self.show(n)

    def _reserve(self, n: int, tab: str, now: float) -> None:
        while len(self.reserved) >= MAX_RESERVED:
            del self.reserved[min(self.reserved, key=lambda m: self.reserved[m][1])]
        self.reserved[n] = (tab, now)

    def show(self, n: int) -> dict:
        """Candidate ``n`` as the page shows it: the texts, their ids, and the model's guess at the
        threshold in use (``threshold_from``: "answers" once they fit one, else "model")."""
        text1, text2 = self.c.pair(n)
        s = float(self.c.similarity[n])
        with self.lock:
            _, sims, labels = self._answered()
            fitted = stats.threshold(sims, labels)[0] is not None
            t = self.threshold()
        return {
            "index": int(n),
            "text1": text1,
            "text2": text2,
            "id1": self.c.ids[n][0],
            "id2": self.c.ids[n][1],
            "similarity": s,
            "threshold": t,
            "threshold_from": "answers" if fitted else "model",
            "duplicate": bool(s > t),
        }

    def answer(self, n: int, label: int | None, tab: str = "") -> bool:
        """Record ``label`` (1 duplicate, 0 not, None skip) for candidate ``n``; whether it was written: False for a
        skip (never written) and for a pair answered already (in another tab: the first answer stands)."""
        if not 0 <= n < len(self.c):
            raise DataError(f"no candidate pair {n} (there are {len(self.c)})")
        with self.lock:
            self.reserved.pop(n, None)
            if label is None:
                self.skipped.add(n)
                return False
            text1, text2 = self.c.pair(n)
            id1, id2 = self.c.ids[n]
            saved = self.store.add(answer(text1, text2, label, id1, id2, self.c.similarity[n]))
            if saved:
                self.answered_by.setdefault(tab, []).append(pair_key(text1, text2))
            return saved

    def undo(self, tab: str = "") -> dict | None:
        """Take back ``tab``'s last answer (never another tab's: it was acknowledged there); its
        pair is shown to ``tab`` again (None: this tab has nothing to undo)."""
        with self.lock:
            self.store.refresh()
            mine = self.answered_by.get(tab, [])
            while mine and mine[-1] not in self.store.keys:  # undone meanwhile (another process)
                mine.pop()
            if not mine:
                return None
            gone = self.store.undo(mine[-1])
            mine.pop()
            if gone is None:
                return None
            n = self.index_of.get(gone.key)
            if n is None:
                return {"undone": gone.text1, "next": None}
            for other in [m for m, (who, _) in self.reserved.items() if who == tab]:
                del self.reserved[other]
            self._reserve(n, tab, time.monotonic())
            return self.show(n)

    def save(self, choice: str = "fitted") -> dict:
        """Write the model with the calibration fitted on the answers (as ``siamese calibrate``
        fits it) and the chosen threshold (``fitted``: the most accurate; ``target``: the one for
        the target precision) to ``save_to``, atomically."""
        from ..data.pairs import Pairs
        from ..decision.calibration import calibrate

        if choice not in ("fitted", "target"):
            raise ConfigError(f"choice must be 'fitted' or 'target', got {choice!r}")
        if self.save_to is None:
            raise ConfigError("this session has no folder to save the model to")
        with self.lock:
            summary = self.stats()
            t = summary["threshold"] if choice == "fitted" else summary.get("target_threshold")
            if summary["calibration"] is None or t is None:
                raise DataError(
                    "too few answers to save: the calibration needs at least 2 duplicates and 2 non-duplicates"
                    + ("" if choice == "fitted" else f", and a threshold reaching precision {self.target_precision}")
                )
            answers = [a for a in self.store.answers if a.key not in self.learned_keys]
            pairs = Pairs(
                [a.text1 for a in answers],
                [a.text2 for a in answers],
                np.array([a.label for a in answers], dtype=np.int8),
                source=str(self.store.path),
            )
            scores = np.array([self._similarity(a) for a in answers])
            fitted = calibrate(self.model, pairs, scores=scores)
            self.model.set_threshold(t)
            self.model.info["threshold_choice"] = {"by": "label", "choice": choice, **_choice(summary, choice)}
            self.model.save(self.save_to)
            return {
                "path": str(self.save_to),
                "threshold": self.model.threshold,
                "calibration": fitted["method"],
                "next": self.next_steps(),
            }

    def labelled_pairs(self):
        """Every answer saved so far, as labelled pairs (what the page's learn learns from)."""
        from ..data.pairs import Pairs

        with self.lock:
            self.store.refresh()
            answers = list(self.store.answers)
        return Pairs(
            [a.text1 for a in answers],
            [a.text2 for a in answers],
            np.array([a.label for a in answers], dtype=np.int8),
            source=str(self.store.path),
        )

    def adopt(self, model, learned_on, *, same_vectors: bool = False) -> None:
        """Carry on with ``model``, learned from the pairs ``learned_on``: the candidates' texts
        encoded with it (outside the lock: answering goes on meanwhile; not when ``same_vectors``:
        the model was kept as it was), their similarities and the model's threshold replaced, and
        the selection told where the two models disagree. Statistics and Save count only answers
        it did not learn from (all of them when it was kept as it was)."""
        from .learning import disagreement

        fine_tuned = model.info.get("learned", {}).get("chosen") == "fine-tuned"
        if same_vectors:
            similarity = self.c.similarity
        else:
            vectors = model.encode(self.c.texts)
            similarity = np.einsum("ij,ij->i", vectors[self.c.first], vectors[self.c.second]).astype(np.float64)
        with self.lock:
            old = self.c.similarity
            self.c.similarity = similarity
            self.model, self.model_threshold = model, float(model.threshold)
            self.learned_keys = (
                {pair_key(t1, t2) for t1, t2 in zip(learned_on.text1, learned_on.text2)} if fine_tuned else set()
            )
            self.rescored = self.rescored or similarity is not old
            changed = disagreement(old, similarity) if similarity is not old else None
            self.selector = Selector(self.c, strategy=self.selector.strategy, seed=self.seed)
            self.selector.learned(changed, len(self._answered()[0]))
            self._stats = None

    def next_steps(self) -> list[str]:
        """Commands that use the saved model on the labelled data (shown after Save)."""
        model, source = shlex.quote(str(self.save_to)), shlex.quote(self.source or "FILE")
        if self.from_pairs:
            first = f"siamese score {model} --data {source} --out scored.csv"
        else:
            first = f"siamese dedupe {model} --data {source} --out {shlex.quote(str(self.save_to) + '-dedupe')}"
        return [first, f'siamese predict {model} "first text" "second text"', f"siamese serve {model}"]

    def _similarity(self, a) -> float:
        n = self.index_of.get(a.key)
        if n is not None:
            return float(self.c.similarity[n])
        if not math.isnan(a.similarity) and not self.rescored:  # after a learn: the new model's
            return a.similarity
        return float(self.model.similarity_pairwise([a.text1], [a.text2])[0])


def _choice(summary: dict, choice: str) -> dict:
    if choice == "fitted":
        keys = {"precision": "precision", "recall": "recall", "flags": "flags"}
    else:
        keys = {"target": "target_precision", "recall": "target_recall", "flags": "target_flags"}
    return {"answers": summary["answers"], **{k: summary.get(v) for k, v in keys.items()}}


# -- candidates from files ----------------------------------------------------------------------------


def corpus(
    model, path: str | os.PathLike, column: str | None = None, *, k: int = 10, progress: bool = False, reuse=None
):
    """The corpus's candidate pairs and, per distinct text, its row's other columns (for an oracle).
    ``reuse``: a :class:`siamese.search.reuse.KnownVectors` whose vectors are taken instead of
    encoding the texts it holds."""
    from ..data.records import exact_groups, read_records
    from ..search.index import require_cosine

    require_cosine(model)
    records = read_records(path, column)
    distinct, _ = exact_groups([r.text for r in records])
    kept = [records[r] for r in distinct.tolist()]
    if len(kept) < 2:
        raise DataError(f"{path}: fewer than 2 distinct texts: no pairs to label")
    texts = [r.text for r in kept]

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, progress=progress)

    vectors = encode(texts) if reuse is None else reuse.take(texts, encode)
    found = corpus_candidates(vectors, [r.text for r in kept], [r.id for r in kept], k=k)
    return found, [r.columns for r in kept]


def read_given_pairs(path: str | os.PathLike, *, format="auto", text1=None, text2=None) -> dict:
    """A pair file's rows, before any model sees them: ``lines``, ``first``, ``second`` and each row's ``fields``."""
    from ..data.pairs import open_pairs, resolve_format

    fmt = resolve_format(path, format, text1, text2, labelled=False)
    read: dict[str, list] = {"lines": [], "first": [], "second": [], "fields": []}
    with open_pairs(path, fmt, labelled=False) as stream:
        for row in stream.rows:
            read["lines"].append(row.line)
            read["first"].append(row.text1)
            read["second"].append(row.text2)
            read["fields"].append(dict(zip(stream.header, row.fields)))
    if not read["first"]:
        raise DataError(f"{path}: no pairs after the header")
    return read


def given_pairs(model, path: str | os.PathLike, *, format="auto", text1=None, text2=None, read: dict | None = None):
    """The pairs of a file as candidates (ids: their line numbers) and each pair's other columns (``read``: the
    file's :func:`read_given_pairs`, when the caller has it already)."""
    read = read or read_given_pairs(path, format=format, text1=text1, text2=text2)
    first, second = read["first"], read["second"]
    return pair_candidates(first, second, model.similarity_pairwise(first, second), read["lines"]), read["fields"]


def check_oracle_labels(read: dict, column: str, source="") -> list[int]:
    """Every row's 0/1 label in ``column`` of a pair file's :func:`read_given_pairs`, each checked as the pair
    readers check a label column (``FILE:LINE: column 'x': ...``)."""
    fields = read["fields"]
    if column not in fields[0]:
        raise DataError(f"{source}: no oracle column {column!r} (found: {column_list(list(fields[0]))})")
    return [parse_label(row[column], source, line, column) for row, line in zip(fields, read["lines"])]


def oracle(candidates: Candidates, columns: list[dict], column: str, *, pairs: bool, source="") -> Callable:
    """``label(n)`` from ``column``: a pair file's 0/1 label (every row's checked first, as the pair readers check a
    label column: a bad one is ``FILE:LINE: column 'x': ...`` before any answer), or for a corpus whether the
    pair's two texts have the same value there (an answer id, a cluster)."""
    if not columns or column not in columns[0]:
        found = column_list(list(columns[0])) if columns else "none"
        raise DataError(f"{source}: no oracle column {column!r} (found: {found})")
    if pairs:  # ids are the pairs' lines in the file
        read = {"fields": columns, "lines": [candidates.ids[n][0] for n in range(len(columns))]}
        return check_oracle_labels(read, column, source).__getitem__

    def label(n: int) -> int | None:
        a, b = (columns[i][column].strip() for i in (candidates.first[n], candidates.second[n]))
        return None if not a or not b else int(a == b)

    return label


def replay(session: LabelSession, label: Callable[[int], int | None], budget: int, *, progress: bool = False) -> dict:
    """Answer from ``label`` until the labels file holds ``budget`` answers or no pair is left."""
    from ..io.progress import tqdm

    with tqdm(
        total=budget, initial=min(len(session.store), budget), desc="replay", unit="answer", disable=not progress
    ) as bar:
        while len(session.store) < budget:
            shown = session.next("oracle")
            if shown is None:
                break
            session.answer(shown["index"], label(shown["index"]), "oracle")
            bar.update(len(session.store) - bar.n)
    return session.stats()


__all__ = ["LabelSession", "check_oracle_labels", "corpus", "given_pairs", "oracle", "read_given_pairs", "replay"]
