"""A dedupe run: texts grouped with their duplicates (or checked against a reference set), saved as a
folder that can be re-thresholded without encoding anything again.

Folder layout (written at once with ``atomic_dir``; a re-threshold rewrites only the results,
each file atomically, ``result.json`` last)::

    run.json          format, mode (self | against), floor, k, index kind, model fingerprint and
                      folder, the sources read (inputs: never rewritten)
    records.jsonl     every input record in order: {"id", "row", "text", "columns"?}
    pairs.npz         candidate pairs above the floor (NumPy arrays, no pickles): first, second,
                      similarity, and text_of (for each row, the distinct text it is a copy of);
                      self: first/second are distinct texts; against: first is a distinct new
                      text, second a reference position; with a verifier (dedupe --verify) also
                      first_stage (the proposing model's similarity) and verifier (the verifier's
                      score, NaN where it was not asked): ``similarity`` is then the decision
    vectors.npy       self: the unit vectors of the distinct texts (members' similarity to their
                      cluster's kept record, whatever the clustering)
    reference.jsonl   against: the reference records named by a pair: {"ref", "id", "text", ...}
    clusters.jsonl    self results: one kept record per line with its duplicates
    matches.jsonl     against results: one flagged new record per line with its reference matches
    result.json       threshold, clustering, min_size and counts of the current results

A re-threshold is exact: the candidates are each text's ``k`` nearest neighbours above the floor,
so keeping those above a higher threshold gives the pairs a fresh run at that threshold finds.
"""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..data.records import Record, as_records, exact_groups, normalise
from ..decision.cascade import FIXED_BAND
from ..decision.threshold import check_threshold
from ..errors import ConfigError
from ..io.atomic import as_umask_allows, atomic_dir, atomic_file, clear_leftovers, recover, target_lock
from ..io.manifest import Field, check_fields, read_json_object, read_manifest
from ..version import __version__
from .cascade import PROPOSE
from .index import DuplicateIndex, SearchIndexError, require_cosine
from .pairs import (
    DEFAULT_CLUSTERING,
    DuplicatePairs,
    check_clustering,
    check_kind,
    clusters,
    cross_pairs,
    duplicate_pairs,
    vector_index,
)

if TYPE_CHECKING:  # a dedupe with a static student never needs torch (siamese.models.static_reader)
    from ..models.siamese import SiameseModel

FORMAT = "siamese-dedupe/1"
# What run.json and result.json hold, checked before a run is used.
RUN_FIELDS = {
    "mode": Field(str),
    "floor": Field(float, lo=-1, hi=1),
    "k": Field(int, lo=1),
    "kind": Field(str),
    "model_fingerprint": Field(str, optional=True),
    "model_path": Field(str, optional=True),
    "precision": Field(str, optional=True),
    "siamese_version": Field(str, optional=True),
    "sources": Field(dict),
}
RESULT_FIELDS = {
    "threshold": Field(float, lo=-1, hi=1),
    "clustering": Field(str, optional=True),
    "min_size": Field(int, optional=True, lo=2),
    "summary": Field(dict),
}
MODES = ("self", "against")
FLOOR_MARGIN = 0.05  # default floor: this far under the threshold, so a run can be re-thresholded a little lower
# A pair verdict's threshold is chosen on balanced validation pairs, most of them related texts; in a
# corpus nearly every pair is unrelated and a false merge drops a record, so dedupe needs precision.
# At MiniLM's pair threshold (~0.81) a question bank such as InsuranceQA chains into one cluster of
# most of it; at 0.9 cosine (SemHash's default) the pairs it accepts are paraphrases.
DEDUPE_MIN_THRESHOLD = 0.9
# A bi-encoder verifier's threshold is on its own scale; the proposing model searches this far
# under it, and the band chosen on a sample keeps only what the verifier would accept.
CASCADE_FLOOR_MARGIN = 0.25
STAGES = ("first_stage", "verifier")
CROSS_BAND = FIXED_BAND  # a cross-encoder verifier's default band: first-stage similarity within this of the threshold


def default_threshold(model: SiameseModel) -> float:
    """The dedupe threshold when none is given: the model's, but at least :data:`DEDUPE_MIN_THRESHOLD`."""
    return max(float(model.threshold), DEDUPE_MIN_THRESHOLD)


@dataclass
class Duplicate:
    """A record found to duplicate another: its similarity to it, and the id of the record it is an
    exact copy of (same text after collapsing whitespace), if it is one."""

    record: Record
    similarity: float
    exact_of: str | None = None

    def as_json(self) -> dict:
        out = {**self.record.as_json(), "similarity": self.similarity}
        if self.exact_of is not None:
            out["exact_of"] = self.exact_of
        return out


@dataclass
class Cluster:
    """A kept record and its duplicates, each with its similarity to the kept record, best first."""

    kept: Record
    duplicates: list[Duplicate]

    @property
    def size(self) -> int:
        return 1 + len(self.duplicates)

    def as_json(self, number: int) -> dict:
        return {
            "cluster": number,
            "size": self.size,
            **self.kept.as_json(),
            "duplicates": [d.as_json() for d in self.duplicates],
        }


@dataclass
class Flagged:
    """A new record that duplicates reference records (its matches, best first)."""

    record: Record
    matches: list[Duplicate]

    def as_json(self) -> dict:
        return {**self.record.as_json(), "matches": [m.as_json() for m in self.matches]}


@dataclass
class Accepted:
    """A pair accepted as duplicates: the kept (or new) record, its duplicate (or reference match), the similarity."""

    first: Record
    second: Record
    similarity: float

    def as_json(self) -> dict:
        return {"similarity": self.similarity, "first": self.first.as_json(), "second": self.second.as_json()}


def _floor(threshold: float, floor: float | None) -> float:
    floor = max(-1.0, round(threshold - FLOOR_MARGIN, 6)) if floor is None else check_threshold(floor, "floor")
    if floor > threshold:
        raise ConfigError(f"floor {floor:g} is above the threshold {threshold:g}; it must be at or below it")
    return floor


class DedupeRun:
    """A finished dedupe, in memory and in its folder (see the module's docstring)."""

    def __init__(
        self,
        path: Path,
        meta: dict,
        records: list[Record],
        text_of: np.ndarray,
        pairs: DuplicatePairs,
        *,
        vectors: np.ndarray | None = None,
        reference: dict[int, Record] | None = None,
        stages: dict[str, np.ndarray] | None = None,
    ):
        self.path, self.meta, self.records, self.text_of, self.pairs = Path(path), meta, records, text_of, pairs
        self.vectors, self.reference = vectors, reference
        self.stages = stages  # with a verifier: each pair's first-stage similarity and verifier score
        self.distinct = np.unique(text_of, return_index=True)[1]  # row of each distinct text's first record
        self.threshold = self.clustering = self.min_size = None

    @property
    def mode(self) -> str:
        return self.meta["mode"]

    # -- results -------------------------------------------------------------------------

    def clusters(self) -> list[Cluster]:
        """Self mode: each kept record with its duplicates (clusters of at least ``min_size`` records)."""
        if self.mode != "self":
            raise ConfigError(f"{self.path}: a run against a reference has matches, not clusters")
        copies = self._copies()
        found = []
        grouped = set()
        for group in clusters(len(self.distinct), self.pairs.above(self.threshold), self.clustering):
            grouped.update(group)
            centre, members = group[0], np.asarray(group[1:], dtype=np.int64)
            sims = self._similarities(centre, members)
            kept = self.records[self.distinct[centre]]
            dups = [Duplicate(self.records[r], 1.0, kept.id) for r in copies.get(centre, [])]
            for m, s in sorted(zip(members.tolist(), sims.tolist()), key=lambda x: (-x[1], x[0])):
                first = self.records[self.distinct[m]]
                s = round(float(s), 6)
                dups.append(Duplicate(first, s))
                dups.extend(Duplicate(self.records[r], s, first.id) for r in copies.get(m, []))
            found.append(Cluster(kept, dups))
        for d, rows in copies.items():  # texts with exact copies only
            if d not in grouped:
                kept = self.records[self.distinct[d]]
                found.append(Cluster(kept, [Duplicate(self.records[r], 1.0, kept.id) for r in rows]))
        found = [c for c in found if c.size >= self.min_size]
        return sorted(found, key=lambda c: (-c.size, c.kept.row))

    def _similarities(self, centre: int, members: np.ndarray) -> np.ndarray:
        """Each member's similarity to its cluster's centre: the vectors' cosine, or where a verifier
        decided the pair (dedupe --verify), the pair's decision score."""
        sims = self.vectors[members] @ self.vectors[centre] if len(members) else np.empty(0)
        if self.stages is None or not len(members):
            return sims
        if getattr(self, "_decided", None) is None:
            n = len(self.distinct)
            keys = self.pairs.first.astype(np.int64) * n + self.pairs.second
            order = np.argsort(keys)
            self._decided = (keys[order], self.pairs.similarity[order])
        keys, decided = self._decided
        n = len(self.distinct)
        want = np.minimum(members, centre) * n + np.maximum(members, centre)
        at = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
        found = (keys[at] == want) if len(keys) else np.zeros(len(want), bool)
        return np.where(found, decided[at] if len(keys) else 0, sims)

    def flagged(self) -> list[Flagged]:
        """Against mode: every new record above the threshold to a reference record, in input order."""
        if self.mode != "against":
            raise ConfigError(f"{self.path}: a self dedupe has clusters, not matches against a reference")
        pairs = self.pairs.above(self.threshold)
        order = np.lexsort((pairs.second, -pairs.similarity, pairs.first))
        matches: dict[int, list[Duplicate]] = {}
        for d, ref, s in zip(
            pairs.first[order].tolist(), pairs.second[order].tolist(), pairs.similarity[order].tolist()
        ):
            r = self.reference[ref]
            exact = normalise(r.text) == normalise(self.records[self.distinct[d]].text)
            matches.setdefault(d, []).append(Duplicate(r, 1.0 if exact else round(s, 6), r.id if exact else None))
        return [Flagged(rec, matches[d]) for rec, d in zip(self.records, self.text_of.tolist()) if d in matches]

    def least_similar(self, n: int = 10) -> list[Accepted]:
        """The ``n`` least similar pairs accepted as duplicates (exact copies left out): the borderline
        cases to review. Self: a kept record and a member; against: a new record and a reference match."""
        if self.mode == "self" and self.clustering == "components":
            pairs = self._accepted_links()
        elif self.mode == "self":
            pairs = [
                Accepted(c.kept, d.record, d.similarity)
                for c in self.clusters()
                for d in c.duplicates
                if d.exact_of is None
            ]
        else:
            pairs = [
                Accepted(f.record, m.record, m.similarity)
                for f in self.flagged()
                for m in f.matches
                if m.exact_of is None
            ]
        return sorted(pairs, key=lambda p: (p.similarity, p.first.row, p.second.row))[:n]

    def _accepted_links(self) -> list[Accepted]:
        """Components: the pairs above the threshold that link the written clusters (a member can sit
        under the threshold to its cluster's centre, joined by a chain; that is not an accepted pair)."""
        written = {
            int(self.text_of[r.row]) for c in self.clusters() for r in (c.kept, *(d.record for d in c.duplicates))
        }
        pairs = self.pairs.above(self.threshold)
        return [
            Accepted(self.records[self.distinct[a]], self.records[self.distinct[b]], round(float(s), 6))
            for a, b, s in pairs
            if a in written
        ]

    def results(self) -> list[Cluster] | list[Flagged]:
        """The clusters (self) or the flagged new records (against) at the current threshold."""
        return self.clusters() if self.mode == "self" else self.flagged()

    def summary(self, results: list | None = None) -> dict:
        """Counts of the current results (pass ``results`` to reuse them)."""
        found = self.results() if results is None else results
        out = {
            "mode": self.mode,
            "threshold": self.threshold,
            "floor": self.meta["floor"],
            "texts": len(self.records),
            "distinct_texts": len(self.distinct),
            "out": str(self.path),
        }
        if self.mode == "self":
            return {
                **out,
                "clustering": self.clustering,
                "min_size": self.min_size,
                "pairs": int((self.pairs.similarity > self.threshold).sum()),
                "clusters": len(found),
                "clustered_texts": sum(c.size for c in found),
                "exact_duplicates": sum(d.exact_of is not None for c in found for d in c.duplicates),
            }
        return {
            **out,
            "reference": self.meta["reference"],
            "flagged": len(found),
            "exact_matches": sum(any(m.exact_of for m in f.matches) for f in found),
        }

    # -- persistence ---------------------------------------------------------------------

    def rethreshold(self, threshold: float, *, clustering: str | None = None, min_size: int | None = None) -> dict:
        """Recompute the results at another threshold (at or above the run's floor) from the saved
        candidate pairs, and rewrite the results in the folder. Returns the new summary."""
        threshold = check_threshold(threshold)
        if threshold < self.meta["floor"]:
            how = (
                "a cascade's run is re-thresholded upward only: run the dedupe again at that threshold"
                if "verified" in self.meta
                else "run the dedupe again with a lower --floor"
            )
            raise ConfigError(
                f"{self.path}: threshold {threshold:g} is under this run's floor {self.meta['floor']:g}; {how}"
            )
        self._set(threshold, clustering or self.clustering or DEFAULT_CLUSTERING, min_size or self.min_size or 2)
        with target_lock(self.path):  # a dedupe writing this folder meanwhile would replace it
            recover(self.path)
            return self._write_results(self.path)

    def _set(self, threshold: float, clustering: str, min_size: int) -> None:
        if min_size < 2:
            raise ConfigError(f"min_size must be at least 2, got {min_size}")
        self.threshold, self.clustering, self.min_size = float(threshold), check_clustering(clustering), int(min_size)

    def _copies(self) -> dict[int, list[int]]:
        """Distinct text → rows of its exact copies (after the first)."""
        rows = np.flatnonzero(self.distinct[self.text_of] != np.arange(len(self.text_of)))
        copies: dict[int, list[int]] = {}
        for r in rows.tolist():
            copies.setdefault(int(self.text_of[r]), []).append(r)
        return copies

    def _write_results(self, folder: Path) -> dict:
        found = self.results()
        name = "clusters.jsonl" if self.mode == "self" else "matches.jsonl"
        rows = (c.as_json(n) for n, c in enumerate(found)) if self.mode == "self" else (x.as_json() for x in found)
        with atomic_file(folder / name) as tmp:
            _write_jsonl(tmp, rows)
            as_umask_allows(tmp)
        summary = self.summary(found)
        result = {
            "threshold": self.threshold,
            "clustering": self.clustering,
            "min_size": self.min_size,
            "summary": summary,
        }
        with atomic_file(folder / "result.json") as tmp:
            tmp.write_text(json.dumps(result, indent=2) + "\n")
            as_umask_allows(tmp)
        return summary

    def _save(self) -> None:
        with atomic_dir(self.path, kind="dedupe run") as tmp:
            (tmp / "run.json").write_text(json.dumps(self.meta, indent=2) + "\n")
            _write_jsonl(tmp / "records.jsonl", (r.as_json() for r in self.records))
            np.savez(
                tmp / "pairs.npz",
                first=self.pairs.first,
                second=self.pairs.second,
                similarity=self.pairs.similarity,
                text_of=self.text_of,
                **(self.stages or {}),
            )
            if self.vectors is not None:
                np.save(tmp / "vectors.npy", self.vectors)
            if self.reference is not None:
                _write_jsonl(
                    tmp / "reference.jsonl", ({"ref": k, **r.as_json()} for k, r in sorted(self.reference.items()))
                )
            self._write_results(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> DedupeRun:
        """Open a finished run's folder (no model needed)."""
        path = Path(path)
        clear_leftovers(path)  # what a killed dedupe of this folder left beside it
        meta = read_manifest(path, "run.json", FORMAT, SearchIndexError, "dedupe run")
        check_fields(meta, RUN_FIELDS, path / "run.json", SearchIndexError)
        if meta.get("mode") not in MODES or "floor" not in meta:
            raise SearchIndexError(
                f"{path / 'run.json'}: field 'mode' must be one of {', '.join(MODES)} (and 'floor' given)"
            )
        result = read_json_object(path / "result.json", SearchIndexError)
        check_fields(result, RESULT_FIELDS, path / "result.json", SearchIndexError)
        if "threshold" not in result:
            raise SearchIndexError(f"{path / 'result.json'}: field 'threshold' is missing")
        with _reading(path / "records.jsonl"):
            rows = _read_jsonl(path / "records.jsonl")
            records = [Record(row["row"], row["id"], row["text"], row.get("columns", {})) for row in rows]
        with _reading(path / "pairs.npz"), np.load(path / "pairs.npz", allow_pickle=False) as z:
            pairs = DuplicatePairs(z["first"], z["second"], z["similarity"])
            text_of = z["text_of"]
            stages = {name: z[name] for name in STAGES if name in z.files} or None
            if stages and any(len(a) != len(pairs) for a in stages.values()):
                raise ValueError(f"{', '.join(stages)} do not hold one score per pair")
        vectors = reference = None
        if meta["mode"] == "self":
            with _reading(path / "vectors.npy"):
                vectors = np.load(path / "vectors.npy", mmap_mode="r", allow_pickle=False)
        else:
            with _reading(path / "reference.jsonl"):
                reference = {
                    row["ref"]: Record(row["row"], row["id"], row["text"], row.get("columns", {}))
                    for row in _read_jsonl(path / "reference.jsonl")
                }
        _check_shapes(path, records, text_of, pairs, vectors)
        self = cls(path, meta, records, text_of, pairs, vectors=vectors, reference=reference, stages=stages)
        self._set(result["threshold"], result.get("clustering") or "components", result.get("min_size") or 2)
        return self


def _check_shapes(path: Path, records: list, text_of: np.ndarray, pairs, vectors) -> None:
    """The run's files agree: one text_of entry per record; text_of and the pairs point at rows of vectors."""
    where = None
    if len(records) != len(text_of):
        where = f"records.jsonl has {len(records)} records, pairs.npz maps {len(text_of)}"
    elif any(len(a) and a.min() < 0 for a in (text_of, pairs.first, pairs.second)):
        where = "pairs.npz: a negative row"
    elif vectors is not None:
        rows = len(vectors) if vectors.ndim == 2 else -1
        top = max([int(a.max()) for a in (text_of, pairs.first, pairs.second) if len(a)], default=-1)
        if rows < 0 or top >= rows:
            where = f"vectors.npy holds {max(rows, 0)} rows, pairs.npz points at row {top}"
    if where:
        raise SearchIndexError(f"{path}: damaged dedupe run ({where})")


@contextlib.contextmanager
def _reading(file: Path):
    """A damaged file of a run (truncated, emptied, another file's bytes) as a one-line error naming it."""
    try:
        yield
    except (OSError, KeyError, ValueError, IndexError, TypeError, EOFError, zipfile.BadZipFile) as e:
        # np.load raises EOFError on an empty file
        raise SearchIndexError(f"{file}: damaged dedupe run file ({type(e).__name__}: {e})") from None


def _write_jsonl(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _meta(model: SiameseModel, mode: str, floor: float, k: int, kind: str, sources: dict | None) -> dict:
    return {
        "format": FORMAT,
        "mode": mode,
        "floor": floor,
        "k": k,
        "kind": kind,
        "model_fingerprint": model.fingerprint(),
        "model_path": str(model.path) if model.path else None,
        "precision": model.encoding_precision(),  # what the vectors were computed in (see reuse.py)
        "siamese_version": __version__,
        "sources": sources or {},
    }


def dedupe(
    model: SiameseModel,
    texts: Sequence[str] | Sequence[Record],
    out: str | os.PathLike,
    *,
    threshold: float | None = None,
    floor: float | None = None,
    k: int = 20,
    kind: str = "auto",
    clustering: str = DEFAULT_CLUSTERING,
    min_size: int = 2,
    progress: bool = False,
    sources: dict | None = None,
    verify=None,
    verify_band: float | str | None = "auto",
    verify_agreement: float = 0.99,
    engine=None,
    reuse=None,
) -> DedupeRun:
    """Group the near-duplicates among ``texts`` (plain texts or :class:`Record`) and save the run to ``out``.

    ``engine`` (e.g. :class:`siamese.search.ray_engine.RayEngine`): where the encoding and the pair
    search run (default: this process); the pairs and clusters are the same. ``reuse``: a
    :class:`siamese.search.reuse.KnownVectors` whose vectors are taken instead of encoding
    the texts it holds.

    Exact copies (equal after collapsing whitespace) are encoded once and linked to their first
    occurrence; candidate pairs above ``floor`` (default: threshold - 0.05) are kept so that
    :meth:`DedupeRun.rethreshold` can regroup at any threshold from the floor up.

    ``verify`` (the cascade: ``model`` proposes, ``verify`` decides; :mod:`siamese.search.cascade`):
    a stronger bi-encoder (MiniLM, mpnet, a fine-tuned model) or a cross-encoder (:mod:`siamese.cross`)
    that decides the candidate pairs in a band of ``model``'s similarity. With a bi-encoder the
    threshold is on its scale (default: its own, but at least 0.9), ``model`` searches down to
    ``floor`` (default: threshold - 0.25), and ``verify_band="auto"`` chooses the band on a sample
    of the candidates so that the cascade's verdicts agree with the verifier's own on
    ``verify_agreement`` of its duplicates (see :func:`~siamese.search.cascade.choose_band`); only
    the texts of the pairs in the band are encoded by it. ``model`` proposes each text's
    :data:`~siamese.search.cascade.PROPOSE` nearest (at least ``k``), the band is chosen on each text's
    ``k`` nearest, and each text keeps its ``k`` best duplicates by the verifier's score, as the
    verifier's own dedupe examines its ``k`` nearest. A number: the band is ``model``'s
    similarity within that much of the threshold; None: every candidate. ``pairs.npz`` records each
    pair's first-stage similarity and verifier score. A cross-encoder decides with its own
    threshold the pairs within ``verify_band`` (default there 0.1) of the threshold: one it rejects
    is dropped, one it accepts under the threshold is kept at the threshold. The verdicts hold for
    this threshold: a later rethreshold regroups the verified pairs.
    """
    check_clustering(clustering)
    check_kind(kind)  # before the (long) encoding
    require_cosine(model)
    cross = verify is not None and getattr(verify, "kind", None) == "cross"
    if verify is not None and not cross:
        require_cosine(verify)
    if cross and verify_band == "auto":
        verify_band = CROSS_BAND
    t = default_threshold(model if verify is None or cross else verify) if threshold is None else threshold
    t = check_threshold(t)
    if verify is not None and not cross:
        floor = max(-1.0, round(t - CASCADE_FLOOR_MARGIN, 6)) if floor is None else min(check_threshold(floor), t)
        if isinstance(verify_band, float | int):
            floor = max(-1.0, min(floor, t - verify_band))
    else:
        floor = _floor(t, floor)
    if cross and verify_band is not None:
        floor = max(-1.0, min(floor, t - verify_band))
    records = as_records(texts)
    distinct, text_of = exact_groups([r.text for r in records])
    texts = [records[r].text for r in distinct.tolist()]
    encode = _encoder(model, progress, engine)
    vectors = encode(texts) if reuse is None else reuse.take(texts, encode)
    # a bi-encoder's cascade proposes more neighbours per text and keeps each text's k best (search.cascade)
    proposed = max(k, PROPOSE) if verify is not None and not cross else k
    if engine is None:
        pairs = duplicate_pairs(vectors, floor, k=proposed, kind=kind, progress=progress)
    else:
        pairs = engine.duplicate_pairs(vectors, floor, k=proposed, kind=kind)
    meta = _meta(model, "self", floor, k, kind, sources)
    if reuse is not None:
        meta["reused"] = {"from": str(reuse.source), "vectors": reuse.reused}
    stages = None
    if cross:
        pairs, meta["verified"], stages = _verified(verify, texts, pairs, t, verify_band)
    elif verify is not None:
        pairs, meta["verified"], stages = _cascaded(
            verify,
            texts,
            pairs,
            t,
            floor=floor,
            band=verify_band,
            agreement=verify_agreement,
            links=k,
            progress=progress,
        )
        meta["verified"]["proposed_per_text"] = proposed
        meta["floor"] = t  # the verdicts hold from the threshold up
    run = DedupeRun(Path(out), meta, records, text_of, pairs, vectors=vectors, stages=stages)
    run._set(t, clustering, min_size)
    run._save()
    return run


def _encoder(model: SiameseModel, progress: bool, engine):
    """texts -> vectors, here or on ``engine``."""
    if engine is None:
        return lambda texts: model.encode(texts, progress=progress)
    return lambda texts: engine.encode(model, texts)


def _cascaded(verifier, texts: list[str], pairs: DuplicatePairs, threshold: float, **options):
    """The candidate pairs decided by a bi-encoder verifier (see :func:`dedupe`): every pair it
    read, with its score as the decision, and those above the band, kept at the threshold at least."""
    from .cascade import cascade

    done = cascade(verifier, texts, pairs.first, pairs.second, pairs.similarity, threshold=threshold, **options)
    asked = ~np.isnan(done.score)
    rows = np.flatnonzero((asked | done.keep) & ~done.beyond)  # beyond each text's best links: not a pair
    at_least = np.maximum(pairs.similarity, np.nextafter(np.float32(threshold), 2))
    decision = np.where(asked, done.score, at_least)[rows].astype(np.float32)
    stages = {"first_stage": pairs.similarity[rows], "verifier": done.score[rows]}
    return DuplicatePairs(pairs.first[rows], pairs.second[rows], decision), done.info, stages


def _verified(cross, texts: list[str], pairs: DuplicatePairs, threshold: float, band: float | None):
    """The candidate pairs after the cross-encoder's verdicts (see :func:`dedupe`), and what it did."""
    from .cascade import verify

    done = verify(cross, texts, pairs.first, pairs.second, pairs.similarity, threshold=threshold, band=band)
    unsure = np.ones(len(pairs), bool) if band is None else np.abs(pairs.similarity - threshold) <= band
    keep = ~unsure | done.keep  # pairs outside the band stay as they are; inside it, the cross-encoder's verdict
    similarity = np.where(
        unsure & done.keep, np.maximum(pairs.similarity, np.nextafter(np.float32(threshold), 2)), pairs.similarity
    ).astype(pairs.similarity.dtype)
    stages = {"first_stage": pairs.similarity[keep], "verifier": done.scores[keep]}
    info = {
        "model": str(getattr(cross, "path", "") or ""),
        "band": band,
        "threshold": threshold,
        "candidates": len(pairs),
        "verified": done.verified,
        "accepted": done.accepted,
        "rejected": done.verified - done.accepted,
        "seconds": round(done.seconds, 3),
        "pairs_per_second": round(done.verified / done.seconds, 1) if done.seconds else None,
    }
    return DuplicatePairs(pairs.first[keep], pairs.second[keep], similarity[keep]), info, stages


def dedupe_against(
    model: SiameseModel,
    texts: Sequence[str] | Sequence[Record],
    reference: Sequence[str] | Sequence[Record] | DuplicateIndex,
    out: str | os.PathLike,
    *,
    threshold: float | None = None,
    floor: float | None = None,
    k: int = 20,
    kind: str = "auto",
    progress: bool = False,
    sources: dict | None = None,
    engine=None,
    reuse=None,
) -> DedupeRun:
    """Which of ``texts`` duplicate a ``reference`` set (texts, records, or an index built by this
    model): each flagged text with its nearest reference records above the threshold.

    A new text equal to a reference text (after collapsing whitespace) is matched to it with
    similarity 1 and not encoded; the rest are encoded once per distinct text and searched among
    the reference's ``k`` nearest (an index folder's own FAISS index, else exact up to 50,000
    reference texts and IVF beyond). The run is saved to ``out`` like :func:`dedupe`'s. ``engine``:
    where the texts are encoded (the search against the reference runs here). ``reuse``: as
    :func:`dedupe`'s, for the new texts and the reference texts alike.
    """
    encoder = _encoder(model, progress, engine)

    def encode(texts: list[str]) -> np.ndarray:
        return encoder(texts) if reuse is None else reuse.take(texts, encoder)

    check_kind(kind)
    require_cosine(model)
    t = check_threshold(default_threshold(model) if threshold is None else threshold)
    floor = _floor(t, floor)
    records = as_records(texts)
    distinct, text_of = exact_groups([r.text for r in records])
    if isinstance(reference, DuplicateIndex):
        if reference.model.fingerprint() != model.fingerprint():
            raise SearchIndexError("the reference index was built by a different model; rebuild it with this model")
        refs = [Record(i, rid, text) for i, (rid, text) in enumerate(zip(reference.ids, reference.texts))]
        index, position = reference.index, np.arange(len(refs), dtype=np.int64)
        described = {"index": len(refs)}
    else:
        refs = as_records(reference)
        position, _ = exact_groups([r.text for r in refs])  # a reference text is encoded once
        index = vector_index(encode([refs[p].text for p in position.tolist()]), kind, k=k)
        described = {"texts": len(refs), "distinct_texts": len(position)}
    first_ref: dict[str, int] = {}
    for i, r in enumerate(refs):
        first_ref.setdefault(normalise(r.text), i)
    exact = [(d, first_ref.get(normalise(records[row].text))) for d, row in enumerate(distinct.tolist())]
    exact_pairs = [(d, ref) for d, ref in exact if ref is not None]
    to_encode = np.asarray([d for d, ref in exact if ref is None], dtype=np.int64)
    found = (
        cross_pairs(
            encode([records[distinct[d]].text for d in to_encode.tolist()]), index, floor, k=k, progress=progress
        )
        if len(to_encode) and index.ntotal
        else DuplicatePairs(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))
    )
    pairs = DuplicatePairs.concat(
        DuplicatePairs(
            np.asarray([d for d, _ in exact_pairs], dtype=np.int64),
            np.asarray([r for _, r in exact_pairs], dtype=np.int64),
            np.ones(len(exact_pairs), np.float32),
        ),
        DuplicatePairs(to_encode[found.first], position[found.second], found.similarity),
    )
    named = {int(x): refs[int(x)] for x in np.unique(pairs.second)}
    meta = {**_meta(model, "against", floor, k, kind, sources), "reference": described}
    if reuse is not None:
        meta["reused"] = {"from": str(reuse.source), "vectors": reuse.reused}
    run = DedupeRun(Path(out), meta, records, text_of, pairs, reference=named)
    run._set(t, "components", 2)
    run._save()
    return run
