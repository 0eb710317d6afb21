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
from typing import TYPE_CHECKING

import faiss
import numpy as np

from ..data.input_files import open_text
from ..data.records import check_texts, normalise
from ..decision.threshold import check_threshold
from ..errors import ConfigError, DataError, ModelError, OutputError, SearchIndexError
from ..io.atomic import atomic_dir, clear_leftovers, naming, target_lock
from ..io.manifest import Field, check_fields, read_manifest
from ..version import __version__
from .faiss_indexes import KINDS, faiss_index, ivf_lists, write_index  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # a dedupe with a static student never needs torch (siamese.models.static_reader)
    from ..models.siamese import SiameseModel

FORMAT = "siamese-index/1"
# Every index.json field, checked before the index is opened.
MANIFEST_FIELDS = {
    "kind": Field(str),
    "size": Field(int, lo=0),
    "dim": Field(int, lo=1, hi=1 << 16),
    "hnsw_m": Field(int, lo=2, hi=1024),
    "ef_search": Field(int, lo=1, hi=1 << 20),
    "nprobe": Field(int, lo=1, hi=1 << 20),
    "model_fingerprint": Field(str, optional=True),
    "model_path": Field(str, optional=True),
    "precision": Field(str, optional=True),
    "siamese_version": Field(str, optional=True),
    "threshold": Field(float),
    "lists_bytes": Field(int, lo=0),  # ondisk: lists.ivfdata's size and checksum, checked before it is mapped
    "lists_sha256": Field(str),
}
# The FAISS class each kind is saved as.
_FAISS_KINDS = {"flat": "IndexFlat", "hnsw": "IndexHNSW", "ivf": "IndexIVF", "ondisk": "IndexIVF"}


def require_cosine(model: SiameseModel) -> None:
    """Inner-product search ranks by cosine similarity: only right for models with the cosine head."""
    if model.config.head != "cosine":
        raise ModelError(f"search needs a model with the cosine head; this one has {model.config.head!r}")


def fill_index(index, vectors: np.ndarray):
    """Add vectors, training the index on them first if it needs it (IVF)."""
    if not index.is_trained:
        index.train(vectors)
    index.add(vectors)
    return index


@dataclass
class Hit:
    id: str
    text: str
    similarity: float
    duplicate: bool


class DuplicateIndex:
    """Texts encoded by one model, searchable by cosine similarity.

    ``kind="flat"`` is exact search; ``kind="hnsw"`` (graph, ``hnsw_m`` links per node) and
    ``kind="ivf"`` (inverted lists trained on the first texts added, ``nprobe`` scanned per query)
    are approximate and much faster on large corpora.
    """

    def __init__(
        self, model: SiameseModel, *, kind: str = "flat", hnsw_m: int = 32, ef_search: int = 128, nprobe: int = 16
    ):
        require_cosine(model)
        self.model = model
        self.kind = kind
        self.hnsw_m = hnsw_m
        self.ef_search = ef_search
        self.nprobe = nprobe
        self.ids: list[str] = []
        self.texts: list[str] = []
        self._seen: set[str] | None = None
        self.index = self._empty(size=0)
        self.pending: np.ndarray | None = None  # ondisk, before save: the vectors, memory-mapped
        self.path: Path | None = None  # the folder it was loaded from or saved to
        self.shard_size = 1_000_000  # ondisk: vectors added to the lists per shard

    def _empty(self, size: int):
        return faiss_index(
            self.kind, self.model.dim, size=size, hnsw_m=self.hnsw_m, ef_search=self.ef_search, nprobe=self.nprobe
        )

    def __len__(self) -> int:
        return len(self.texts)

    def add(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        allow_duplicates: bool = False,
        progress: bool = False,
        engine=None,
        reuse=None,
    ) -> int:
        """Encode and append texts (only the new ones are encoded; on ``engine``, e.g. a
        :class:`siamese.search.ray_engine.RayEngine`, when given); returns how many were added.
        ``reuse``: a :class:`siamese.search.reuse.KnownVectors` whose vectors are taken
        instead of encoding the texts it holds.

        Texts already indexed, or repeated among ``texts`` (equal after collapsing whitespace), are
        skipped unless ``allow_duplicates``. Default ids are the texts' positions in the index.
        """
        texts = list(texts)
        if ids is not None and len(ids) != len(texts):
            raise ConfigError(f"{len(ids)} ids for {len(texts)} texts")
        keys = [normalise(t) for t in texts]
        if not allow_duplicates:
            seen, keep = self._keys(), {}
            for i, key in enumerate(keys):
                if key not in seen:
                    keep.setdefault(key, i)
            rows = list(keep.values())
            texts, keys = [texts[i] for i in rows], [keys[i] for i in rows]
            ids = None if ids is None else [ids[i] for i in rows]
        ids = [str(len(self.texts) + i) for i in range(len(texts))] if ids is None else [str(i) for i in ids]
        if not texts:
            return 0
        if taken := set(ids) & set(self.ids):  # a hit's id names one text
            raise DataError(
                f"id {sorted(taken)[0]!r} is in the index already ({len(taken)} such ids); ids must be unique"
            )
        if self.kind == "ondisk":
            self._add_pending(texts, ids, engine, progress, reuse)
            self._keys().update(keys)
            return len(texts)
        vectors = self._encoder(engine, progress, reuse)(texts)
        if not self.index.is_trained:  # IVF: lists are learnt from the first texts added
            self.index = self._empty(size=len(vectors))
        fill_index(self.index, vectors)
        self.texts.extend(texts)
        self.ids.extend(ids)
        self._keys().update(keys)
        return len(texts)

    def _encoder(self, engine, progress: bool, reuse):
        """texts -> vectors: here or on ``engine``, taking those ``reuse`` holds."""

        def encode(texts: list[str]) -> np.ndarray:
            if engine is not None:
                return engine.encode(self.model, texts)
            return self.model.encode(texts, progress=progress)

        return encode if reuse is None else (lambda texts: reuse.take(texts, encode))

    def _add_pending(self, texts: list[str], ids: list[str], engine, progress: bool, reuse=None) -> None:
        """ondisk: encode into a scratch memory map, a chunk at a time (the vectors need not fit in memory)."""
        if self.texts and self.pending is None:
            raise ConfigError(
                "an on-disk index is built whole: rebuild it with all its texts (siamese index build --kind ondisk)"
            )
        if self.pending is not None:
            raise ConfigError("an on-disk index takes its texts in one add() before save()")
        from .ondisk import preallocate, scratch_folder

        self._scratch = scratch_folder()
        file = Path(self._scratch.name) / "vectors.npy"
        try:
            vectors = np.lib.format.open_memmap(file, mode="w+", dtype=np.float32, shape=(len(texts), self.model.dim))
            preallocate(file)  # a full disk is an error here, not a SIGBUS when the map is written
        except OSError as e:
            self._scratch.cleanup()
            raise OutputError(
                f"{file}: cannot write the on-disk build's scratch vectors ({e.strerror or e}; "
                "$TMPDIR sets where they go)"
            ) from None
        try:
            if engine is not None and reuse is None:
                engine.encode(self.model, texts, out=vectors)
            else:
                encode, chunk = self._encoder(engine, progress, reuse), 1 << 16
                for start in range(0, len(texts), chunk):
                    vectors[start : start + chunk] = encode(texts[start : start + chunk])
        except BaseException:  # an error, or a signal (siamese.cli's SIGTERM): no scratch left behind
            del vectors
            self._scratch.cleanup()
            raise
        self.pending = vectors
        self.texts.extend(texts)
        self.ids.extend(ids)

    def close(self) -> None:
        """Delete an on-disk build's scratch vectors now (save() deletes them once it has written the
        index; otherwise they stay until the process ends, for another try at saving)."""
        self.pending = None
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            scratch.cleanup()

    def _keys(self) -> set[str]:
        """The indexed texts as exact-duplicate checks compare them (built on first use)."""
        if self._seen is None:
            self._seen = {normalise(t) for t in self.texts}
        return self._seen

    def search(
        self, queries: Sequence[str], k: int = 5, *, threshold: float | None = None, rerank=None
    ) -> list[list[Hit]]:
        """The ``k`` most similar indexed texts for each query, best first. ``rerank``: a cross-encoder (loaded,
        or its folder) that re-scores each query's ``k`` hits and re-orders them, deciding at ``threshold`` on its
        own scale (default: its own threshold), as ``siamese search --rerank`` does."""
        if rerank is not None:
            from ..models.loading import load_cross_encoder
            from .cascade import rerank as rerank_hits

            cross = load_cross_encoder(rerank) if isinstance(rerank, (str, os.PathLike)) else rerank
            queries = [queries] if isinstance(queries, str) else queries
            return rerank_hits(cross, queries, self.search(queries, k), threshold=threshold)
        if self.pending is not None:
            raise ConfigError("an on-disk index is searched once saved: save() it, then DuplicateIndex.load() it")
        if isinstance(queries, str):
            queries = [queries]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a whole number >= 1, got {k!r}")
        queries = list(queries)
        check_texts(queries, "queries")
        empty = next((i for i, q in enumerate(queries) if not q.strip()), None)
        if empty is not None:
            raise DataError(f"queries: item {empty} is empty; a query needs words")
        if not len(self):
            return [[] for _ in queries]
        t = self.model.threshold if threshold is None else check_threshold(threshold)
        scores, rows = self.index.search(self.model.encode(list(queries)), min(k, len(self)))
        if rows.size and rows.max() >= len(self.ids):  # ids read from a damaged on-disk lists file
            raise SearchIndexError(f"the index holds {len(self.ids)} texts but found row {rows.max()}: it is damaged")
        return [
            [Hit(self.ids[r], self.texts[r], float(s), bool(s > t)) for s, r in zip(srow, rrow) if r >= 0]
            for srow, rrow in zip(scores, rows)
        ]

    # -- persistence -------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the index folder atomically; see :meth:`SiameseModel.save` for ``overwrite``."""
        path = Path(path)
        lists = {}
        with atomic_dir(path, overwrite=overwrite, kind="index") as tmp:
            if self.kind == "ondisk":
                from .ondisk import LISTS_FILE, build_ondisk, lists_digest

                if self.pending is None:
                    raise ConfigError("an on-disk index is built whole, once: rebuild it with siamese index build")
                build_ondisk(self.pending, tmp, shard_size=self.shard_size, nprobe=self.nprobe)
                lists = dict(zip(("lists_bytes", "lists_sha256"), lists_digest(tmp / LISTS_FILE)))
            else:
                write_index(self.index, tmp / "index.faiss")
            with naming(tmp / "texts.jsonl"), open(tmp / "texts.jsonl", "w", encoding="utf-8") as f:
                for i, t in zip(self.ids, self.texts):
                    f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
            meta = {
                "format": FORMAT,
                "kind": self.kind,
                "size": len(self),
                "dim": self.model.dim,
                "hnsw_m": self.hnsw_m,
                "ef_search": self.ef_search,
                "nprobe": self.nprobe,
                "model_fingerprint": self.model.fingerprint(),
                "model_path": str(self.model.path) if self.model.path else None,
                "precision": self.model.encoding_precision(),  # what the vectors were computed in (see reuse.py)
                "siamese_version": __version__,
                "threshold": self.model.threshold,
                **lists,
            }
            with naming(tmp / "index.json"):
                (tmp / "index.json").write_text(json.dumps(meta, indent=2) + "\n")
        if self.pending is not None:  # built: search the saved index, its lists memory-mapped
            from .ondisk import read_ondisk

            self.index, self.pending = read_ondisk(path / "index.faiss", self.nprobe, lists), None
            self._scratch.cleanup()
        self.path = path.resolve()
        return path

    @classmethod
    def load(
        cls, path: str | os.PathLike, model: SiameseModel | str | os.PathLike | None = None, *, device: str = "auto"
    ) -> DuplicateIndex:
        """Open an index with ``model`` (loaded, a model folder or a pretrained name); with none, the model folder
        recorded at build time is loaded."""
        path = Path(path)
        if isinstance(model, (str, os.PathLike)):
            from ..models.sentence_encoder import load_bi_encoder

            model = load_bi_encoder(model, device=device)
        clear_leftovers(path)  # what a killed build or add of this index left beside it
        meta = read_manifest(path, "index.json", FORMAT, SearchIndexError, "index")
        check_fields(meta, MANIFEST_FIELDS, path / "index.json", SearchIndexError)
        if meta.get("kind") not in KINDS:
            raise SearchIndexError(
                f"{path / 'index.json'}: unknown kind {meta.get('kind')!r} (expected one of {', '.join(KINDS)})"
            )
        for name in ("index.faiss", "texts.jsonl"):
            if not (path / name).is_file():
                raise SearchIndexError(f"{path}: index folder is missing {name}")
        if model is None:
            if not meta.get("model_path"):
                raise SearchIndexError(f"{path}: the index does not record its model folder; pass the model explicitly")
            from ..models.siamese import SiameseModel

            model = SiameseModel.load(meta["model_path"], device=device)
        source = (model.config.encoder_options.get("source") or {}) if getattr(model.encoder, "exported", False) else {}
        if source.get("fingerprint") and meta.get("model_fingerprint") == source["fingerprint"]:
            # Deliberate: an exported model's vectors differ slightly (int8 more), so mixing them
            # with the PyTorch model's in one index would skew every similarity a little.
            raise SearchIndexError(
                f"{path}: built by the PyTorch model this exported model came from; its vectors "
                "differ slightly from the exported model's: rebuild the index with the exported model"
            )
        if meta.get("model_fingerprint") != model.fingerprint():
            raise SearchIndexError(
                f"{path}: built by a different model (fingerprint {str(meta.get('model_fingerprint'))[:12]}…, "
                f"this model is {model.fingerprint()[:12]}…); rebuild the index with this model"
            )
        if meta.get("dim", model.dim) != model.dim:
            raise SearchIndexError(
                f"{path / 'index.json'}: dim {meta['dim']}, but the model's vectors are {model.dim} wide "
                "(built by another model? rebuild the index)"
            )
        self = cls(
            model,
            kind=meta["kind"],
            hnsw_m=meta.get("hnsw_m", 32),
            ef_search=meta.get("ef_search", 128),
            nprobe=meta.get("nprobe", 16),
        )
        try:
            if self.kind == "ondisk":
                from .ondisk import read_ondisk

                self.index = read_ondisk(path / "index.faiss", self.nprobe, meta)
            else:
                self.index = faiss.read_index(str(path / "index.faiss"))
        except RuntimeError as e:
            raise SearchIndexError(f"{path / 'index.faiss'}: unreadable ({str(e).splitlines()[0]})") from None
        found = type(self.index).__name__
        if not found.startswith(_FAISS_KINDS[self.kind]):
            raise SearchIndexError(f"{path / 'index.faiss'}: a {found}, but index.json says kind {self.kind!r}")
        if self.index.d != model.dim:
            raise SearchIndexError(
                f"{path / 'index.faiss'}: vectors of width {self.index.d}, the model's are {model.dim}"
            )
        if self.index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise SearchIndexError(f"{path / 'index.faiss'}: not an inner-product (cosine) index")
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = self.ef_search
        elif self.kind in ("ivf", "ondisk"):
            self.index.nprobe = self.nprobe
        self.ids, self.texts = read_texts_jsonl(path / "texts.jsonl")
        self.path = path.resolve()
        if self.index.ntotal != len(self.texts) or meta.get("size", len(self.texts)) != len(self.texts):
            raise SearchIndexError(
                f"{path}: index holds {self.index.ntotal} vectors, index.json says {meta.get('size')}, "
                f"texts.jsonl has {len(self.texts)} texts"
            )
        return self


def add_to_index(
    path: str | os.PathLike,
    texts: Sequence[str],
    model: SiameseModel | None = None,
    *,
    ids: Sequence[str] | None = None,
    allow_duplicates: bool = False,
    progress: bool = False,
    device: str = "auto",
    reuse=None,
) -> tuple[DuplicateIndex, int]:
    """Append ``texts`` to the index folder ``path`` and save it: (the index, how many were added).

    The whole read-modify-write holds the index's lock, and the folder is read after the lock is
    taken: two processes adding to one index run one after the other, and the second adds to what
    the first saved (else each would save its own texts over the other's)."""
    path = Path(path)
    with target_lock(path):
        index = DuplicateIndex.load(path, model, device=device)
        known = reuse(index.model) if callable(reuse) else reuse  # a folder is opened once the model is known
        added = index.add(texts, ids, allow_duplicates=allow_duplicates, progress=progress, reuse=known)
        index.save(path)
    return index, added


def read_texts_jsonl(file: Path) -> tuple[list[str], list[str]]:
    """The ids and texts of an index's ``texts.jsonl``, each line checked."""
    ids, texts = [], []
    with open_text(file) as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                raise SearchIndexError(f"{file}:{n}: not a JSON line") from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("text"), str):
                raise SearchIndexError(f'{file}:{n}: expected {{"id": string, "text": string}}')
            ids.append(row["id"])
            texts.append(row["text"])
    return ids, texts
