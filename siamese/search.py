"""Duplicate search over a corpus: a FAISS index of a model's encodings, saved with its texts.

An index folder holds ``index.faiss`` (inner product over unit vectors = cosine), ``texts.jsonl``
(one ``{"id", "text"}`` per vector, in index order) and ``index.json`` (kind, size, and the
fingerprint of the model that built it — an index refuses to be searched with another model).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from .atomic import atomic_dir, atomic_file
from .errors import ConfigError, ModelError, SiameseError
from .manifest import read_manifest
from .model import SiameseModel

FORMAT = "siamese-index/1"
KINDS = ("flat", "hnsw")


def faiss_index(kind: str, dim: int, *, hnsw_m: int = 32, ef_search: int = 128):
    """An empty inner-product (= cosine on unit vectors) FAISS index: exact or HNSW."""
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind != "hnsw":
        raise ConfigError(f"unknown index kind {kind!r}; choose one of: {', '.join(KINDS)}")
    index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efSearch = ef_search
    return index


class SearchIndexError(SiameseError):
    """An index folder is missing, damaged, or belongs to another model."""


@dataclass
class Hit:
    id: str
    text: str
    similarity: float
    duplicate: bool


class DuplicateIndex:
    """Texts encoded by one model, searchable by cosine similarity.

    ``kind="flat"`` is exact search; ``kind="hnsw"`` is approximate (HNSW graph, ``hnsw_m``
    links per node) and much faster on large corpora.
    """

    def __init__(self, model: SiameseModel, *, kind: str = "flat", hnsw_m: int = 32, ef_search: int = 128):
        if model.config.head != "cosine":  # an inner-product index ranks by cosine, not by other heads
            raise ModelError(f"search needs a model with the cosine head; this one has {model.config.head!r}")
        self.model = model
        self.kind = kind
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.index = faiss_index(kind, model.dim, hnsw_m=hnsw_m, ef_search=ef_search)

    def __len__(self) -> int:
        return len(self.texts)

    def add(self, texts: Sequence[str], ids: Sequence[str] | None = None, *, progress: bool = False) -> None:
        """Encode and append texts (only the new ones are encoded)."""
        texts = list(texts)
        ids = [str(len(self.texts) + i) for i in range(len(texts))] if ids is None else [str(i) for i in ids]
        if len(ids) != len(texts):
            raise ConfigError(f"{len(ids)} ids for {len(texts)} texts")
        if not texts:
            return
        vectors = self.model.encode(texts, progress=progress)
        self.index.add(vectors)
        self.texts.extend(texts)
        self.ids.extend(ids)

    def search(self, queries: Sequence[str], k: int = 5, *, threshold: float | None = None) -> list[list[Hit]]:
        """The ``k`` most similar indexed texts for each query, best first."""
        if isinstance(queries, str):
            queries = [queries]
        if not len(self):
            return [[] for _ in queries]
        t = self.model.threshold if threshold is None else threshold
        scores, rows = self.index.search(self.model.encode(list(queries)), min(k, len(self)))
        return [
            [Hit(self.ids[r], self.texts[r], float(s), bool(s > t)) for s, r in zip(srow, rrow) if r >= 0]
            for srow, rrow in zip(scores, rows)
        ]

    # -- persistence -------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        with atomic_dir(path) as tmp:
            faiss.write_index(self.index, str(tmp / "index.faiss"))
            with open(tmp / "texts.jsonl", "w", encoding="utf-8") as f:
                for i, t in zip(self.ids, self.texts):
                    f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
            meta = {"format": FORMAT, "kind": self.kind, "size": len(self), "dim": self.model.dim,
                    "hnsw_m": self.hnsw_m, "ef_search": self.ef_search, "model_fingerprint": self.model.fingerprint(),
                    "model_path": str(self.model.path) if self.model.path else None,
                    "threshold": self.model.threshold}
            (tmp / "index.json").write_text(json.dumps(meta, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, model: SiameseModel | None = None) -> DuplicateIndex:
        """Open an index; with no ``model``, the model folder recorded at build time is loaded."""
        path = Path(path)
        meta = read_manifest(path, "index.json", FORMAT, SearchIndexError, "index")
        if model is None:
            if not meta.get("model_path"):
                raise SearchIndexError(f"{path}: the index does not record its model folder; pass the model explicitly")
            model = SiameseModel.load(meta["model_path"])
        if meta.get("model_fingerprint") != model.fingerprint():
            raise SearchIndexError(f"{path}: built by a different model (fingerprint {str(meta.get('model_fingerprint'))[:12]}…, "
                              f"this model is {model.fingerprint()[:12]}…); rebuild the index with this model")
        self = cls(model, kind=meta["kind"], hnsw_m=meta.get("hnsw_m", 32), ef_search=meta.get("ef_search", 128))
        try:
            self.index = faiss.read_index(str(path / "index.faiss"))
        except RuntimeError as e:
            raise SearchIndexError(f"{path / 'index.faiss'}: unreadable ({str(e).splitlines()[0]})") from None
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = self.ef_search
        with open(path / "texts.jsonl", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                self.ids.append(row["id"])
                self.texts.append(row["text"])
        if self.index.ntotal != len(self.texts):
            raise SearchIndexError(f"{path}: index holds {self.index.ntotal} vectors but texts.jsonl {len(self.texts)} texts")
        return self


def duplicate_pairs(vectors: np.ndarray, threshold: float, *, k: int = 20, kind: str = "flat",
                    chunk: int = 4096, progress: bool = False):
    """Yield ``(i, j, similarity)`` with i < j for pairs above ``threshold``, chunk by chunk.

    Each text looks at its ``k`` nearest neighbours (exact with ``flat``, approximate with
    ``hnsw``), so memory stays at one chunk of results whatever the corpus size.
    """
    from tqdm.auto import tqdm

    index = faiss_index(kind, vectors.shape[1], ef_search=max(64, 2 * k))
    index.add(vectors)
    k = min(k + 1, len(vectors))
    for start in tqdm(range(0, len(vectors), chunk), desc="dedupe", unit="chunk", disable=not progress):
        scores, rows = index.search(vectors[start : start + chunk], k)
        for offset, (srow, rrow) in enumerate(zip(scores, rows)):
            i = start + offset
            for s, j in zip(srow, rrow):
                if j > i and s > threshold:
                    yield i, int(j), float(s)


def clusters(n: int, pairs) -> list[list[int]]:
    """Connected components (union-find) of the duplicate graph; singletons left out."""
    parent = np.arange(n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _ in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for x in range(n):
        groups.setdefault(find(x), []).append(x)
    return [g for g in groups.values() if len(g) > 1]


def dedupe(model: SiameseModel, texts: Sequence[str], out: str | os.PathLike, *, threshold: float | None = None,
           k: int = 20, kind: str = "flat", progress: bool = False) -> dict:
    """Group near-duplicate texts into clusters and write them as JSON lines (atomically).

    Each line: ``{"cluster": n, "size": s, "members": [{"row", "text"}...]}``, largest first.
    """
    t = model.threshold if threshold is None else threshold
    vectors = model.encode(list(texts), progress=progress)
    pairs = list(duplicate_pairs(vectors, t, k=k, kind=kind, progress=progress))
    groups = sorted(clusters(len(texts), pairs), key=lambda g: (-len(g), g[0]))
    with atomic_file(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for n, g in enumerate(groups):
            members = [{"row": r, "text": texts[r]} for r in g]
            f.write(json.dumps({"cluster": n, "size": len(g), "members": members}, ensure_ascii=False) + "\n")
    return {"texts": len(texts), "pairs": len(pairs), "clusters": len(groups),
            "clustered_texts": sum(len(g) for g in groups), "threshold": t, "out": str(out)}




def retrieval_metrics(index: DuplicateIndex, queries: Sequence[str], targets: Sequence[str],
                      ks: Sequence[int] = (1, 5, 10)) -> dict:
    """How well each query finds its known duplicate among everything indexed.

    ``targets[i]`` is the text of query i's duplicate (it must be in the index); the query's own
    text is skipped if it is indexed too. Returns recall@k for each k and MRR@max(k).
    """
    depth = max(ks)
    hits = index.search(list(queries), depth + 1)
    ranks = []
    for query, target, found in zip(queries, targets, hits):
        texts = [h.text for h in found if h.text != query][:depth]
        ranks.append(texts.index(target) + 1 if target in texts else None)
    n = len(ranks)
    report = {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / n for k in ks}
    report[f"mrr@{depth}"] = sum(1 / r for r in ranks if r is not None) / n
    report["queries"] = n
    return report


__all__ = ["DuplicateIndex", "Hit", "SearchIndexError", "clusters", "dedupe", "duplicate_pairs", "retrieval_metrics"]
