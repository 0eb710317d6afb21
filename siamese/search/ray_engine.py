"""Corpus jobs on a Ray cluster (``--engine ray``): encoding with Ray Data, the pair search with Ray tasks.

Imported only when a command is given ``--engine ray`` (``pip install 'siamese-sim[ray]'``).

* Encoding: the corpus becomes a Ray Dataset in blocks of ``block_size`` texts (each row keeps
  its line number); ``map_batches`` runs them through a pool of actors, each holding one model
  loaded from the model folder (so the folder must be readable at the same path on every node),
  and the driver streams the vectors back into their rows of the output (a memory-mapped
  ``.npy`` for ``siamese encode``: the vectors never need to fit in the driver's memory).
* Pair search (dedupe): the driver builds the FAISS index once, puts it in Ray's object store,
  and tasks search chunks of the corpus against it with the same code as the local engine
  (:func:`siamese.search.pairs.neighbours`), so the pairs and the clusters are the same.

One CPU of the cluster is left to Ray's readers and the driver: ``actors`` defaults to the
cluster's CPUs minus one. Each actor runs single-threaded torch ops on its CPU.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError, ModelError

ENGINES = ("local", "ray")


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    return engine


class _EncodeActor:
    """One model per actor, loaded once; a batch of rows → their vectors."""

    def __init__(self, folder: str, device: str, precision: str | None, threads: int):
        import torch

        from ..models.siamese import SiameseModel

        torch.set_num_threads(threads)
        self.model = SiameseModel.load(folder, device=device, precision=precision)

    def __call__(self, batch: dict) -> dict:
        return {"row": batch["row"], "vector": self.model.encode(batch["text"].tolist())}


def _search_chunk(index_bytes: np.ndarray, vectors: np.ndarray, start: int, stop: int, k: int, threshold: float):
    """Rows start..stop against the whole index: the local engine's chunk of the search."""
    import faiss

    from .pairs import neighbours, pair_keys

    faiss.omp_set_num_threads(1)  # one task per CPU
    index, n = faiss.deserialize_index(index_bytes), len(vectors)
    return [
        pair_keys(i + start, j, s, n)
        for i, j, s in neighbours(index, vectors[start:stop], min(k + 1, n), threshold, chunk=stop - start)
    ]


class RayEngine:
    """Runs the corpus-sized steps on Ray: a local cluster started here, or the one at ``address``
    (``ray://host:10001`` or ``host:6379``); a cluster the caller already joined (``ray.init``)
    is used as it is."""

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int | None = None,
        block_size: int = 10_000,
        batch_size: int | None = None,
        device: str = "cpu",
        progress: bool = False,
    ):
        if block_size < 1:
            raise ConfigError(f"block size must be at least 1, got {block_size}")
        self.address, self.block_size, self.batch_size = address, block_size, batch_size
        self.device, self.progress = device, progress
        self.ray = self._connect()
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        self.actors = actors or max(1, cpus - 1)

    def _connect(self):
        from ..io.extras import require

        ray = require("ray", "ray")
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.address,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    log_to_driver=self.progress,
                )
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise ConfigError(f"cannot join the Ray cluster at {self.address}: {str(e).splitlines()[0]}") from None
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = self.progress
        return ray

    def encode(self, model, texts: Sequence[str], out: np.ndarray | None = None) -> np.ndarray:
        """Row i of ``out`` (a new array, or e.g. a memory map) ← the vector of ``texts[i]``."""
        import pandas as pd

        if model.path is None:
            raise ModelError("the Ray engine's actors load the model from its folder: save it first (model.save(path))")
        texts = list(texts)
        out = np.empty((len(texts), model.dim), dtype=np.float32) if out is None else out
        if not texts:
            return out
        blocks = [
            pd.DataFrame(
                {
                    "row": np.arange(start, min(start + self.block_size, len(texts))),
                    "text": texts[start : start + self.block_size],
                }
            )
            for start in range(0, len(texts), self.block_size)
        ]
        dataset = self.ray.data.from_pandas(blocks).map_batches(
            _EncodeActor,
            fn_constructor_kwargs={
                "folder": str(model.path),
                "device": self.device,
                "precision": model.precision,
                "threads": 1,
            },
            batch_size=self.batch_size or min(self.block_size, 4096),
            batch_format="numpy",
            concurrency=self.actors,
            num_cpus=1,
        )
        for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            out[batch["row"]] = batch["vector"]
        return out

    def duplicate_pairs(self, vectors: np.ndarray, threshold: float, *, k: int = 20, kind: str = "auto"):
        """:func:`siamese.search.pairs.duplicate_pairs`, its chunks searched by Ray tasks."""
        import faiss

        from .pairs import merge_pairs, vector_index

        n = len(vectors)
        index_ref = self.ray.put(faiss.serialize_index(vector_index(vectors, kind, k=k)))
        vectors_ref = self.ray.put(np.ascontiguousarray(vectors))
        search = self.ray.remote(num_cpus=1)(_search_chunk)
        chunk = max(1, math.ceil(n / (4 * self.actors)))
        found = self.ray.get(
            [
                search.remote(index_ref, vectors_ref, start, min(start + chunk, n), k, threshold)
                for start in range(0, n, chunk)
            ]
        )
        return merge_pairs([part for parts in found for part in parts], n)
