"""Request batching: the texts of concurrent requests encoded in one model call, behind a bounded queue.

Handlers stay synchronous (FastAPI runs them in worker threads): they call ``BatchedModel.encode``,
which hands the texts to one batching thread and waits. That thread takes the first waiting
request, lets others join for up to ``wait_ms`` (or until ``max_batch`` texts), encodes them all at
once and gives each request its rows. One model call for 16 small requests costs little more
than one for a single request, and the calls no longer fight over the two cores.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError


@dataclass(frozen=True)
class BatchConfig:
    enabled: bool = True
    max_batch: int = 128  # texts per model call (a larger request is a call of its own)
    wait_ms: float = 2.0  # how long the first waiting request waits for company
    max_queue: int = 64  # requests waiting for the model; one more is answered 429

    def check(self) -> None:
        if self.max_batch < 1:
            raise ConfigError(f"--max-batch must be at least 1, got {self.max_batch}")
        if not 0 <= self.wait_ms <= 1000:
            raise ConfigError(f"--batch-wait-ms must be between 0 and 1000, got {self.wait_ms}")
        if self.max_queue < 1:
            raise ConfigError(f"--max-queue must be at least 1, got {self.max_queue}")


class Overloaded(Exception):
    """The queue is full: the client should retry later (HTTP 429)."""


# on_batch(queue waits in seconds, one per request; texts in the model call)
BatchObserver = Callable[[list[float], int], None]


@dataclass
class _Job:
    texts: list[str]
    future: Future
    submitted: float


class Batcher:
    """``encode(texts)`` for many threads at once; one model call per batch (or per request when off)."""

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        config: BatchConfig = BatchConfig(),
        on_batch: BatchObserver | None = None,
    ):
        config.check()
        self.config = config
        self._encode = encode
        self._on_batch = on_batch or (lambda waits, texts: None)
        self._cond = threading.Condition()
        self._jobs: deque[_Job] = deque()
        self._queued_texts = 0
        self._running = 0  # requests inside an unbatched model call
        self._closed = False
        self._thread = None
        if config.enabled:
            self._thread = threading.Thread(target=self._loop, name="siamese-batcher", daemon=True)
            self._thread.start()

    @property
    def waiting(self) -> int:
        """Requests queued (batching) or inside a model call (no batching)."""
        return len(self._jobs) + self._running

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not self.config.enabled:
            return self._encode_now(texts)
        job = _Job(texts, Future(), time.perf_counter())
        with self._cond:
            if self._closed:
                raise Overloaded("the server is shutting down")
            if len(self._jobs) >= self.config.max_queue:
                raise Overloaded(f"{len(self._jobs)} requests are waiting for the model; retry shortly")
            self._jobs.append(job)
            self._queued_texts += len(texts)
            self._cond.notify()
        return job.future.result()

    def _encode_now(self, texts: list[str]) -> np.ndarray:
        with self.admitted():
            self._on_batch([0.0], len(texts))
            return self._encode(texts)

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """A model call outside the batches (unbatched encoding, explanations), counted against
        ``max_queue`` with the queued requests: Overloaded when they are already that many."""
        with self._cond:
            if self._closed:
                raise Overloaded("the server is shutting down")
            if self.waiting >= self.config.max_queue:
                raise Overloaded(f"{self.waiting} requests are waiting for the model; retry shortly")
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _take(self) -> list[_Job] | None:
        """Wait for a batch: the first job, plus whoever arrives within wait_ms (up to max_batch texts)."""
        with self._cond:
            while not self._jobs and not self._closed:
                self._cond.wait()
            if self._closed:  # what waits is answered 'shutting down' (429) below, not encoded: a stop is not held up
                return None
            deadline = self._jobs[0].submitted + self.config.wait_ms / 1000
            while self._queued_texts < self.config.max_batch and not self._closed:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                self._cond.wait(left)
            jobs, size = [], 0
            while self._jobs and (not jobs or size + len(self._jobs[0].texts) <= self.config.max_batch):
                job = self._jobs.popleft()
                jobs.append(job)
                size += len(job.texts)
            self._queued_texts -= size
            return jobs

    def _loop(self) -> None:
        while (jobs := self._take()) is not None:
            start = time.perf_counter()
            texts = [t for job in jobs for t in job.texts]
            self._on_batch([start - job.submitted for job in jobs], len(texts))
            try:
                vectors = self._encode(texts)
            except Exception as e:  # one bad request must not fail its batch-mates: retry each alone
                if len(jobs) == 1:
                    jobs[0].future.set_exception(e)
                    continue
                for job in jobs:
                    try:
                        job.future.set_result(self._encode(job.texts))
                    except Exception as err:
                        job.future.set_exception(err)
                continue
            offset = 0
            for job in jobs:
                job.future.set_result(vectors[offset : offset + len(job.texts)])
                offset += len(job.texts)
        with self._cond:  # closed: nobody will serve what is left
            while self._jobs:
                self._jobs.popleft().future.set_exception(Overloaded("the server is shutting down"))


class BatchedModel:
    """The model as the handlers see it: ``encode`` and ``similarity`` (so also index search, which
    encodes through its model) go through the batcher; everything else is the model's own."""

    def __init__(self, model, batcher: Batcher):
        self._model = model
        self.batcher = batcher

    def __getattr__(self, name):
        return getattr(self._model, name)

    def encode(self, texts: Sequence[str] | str, **_) -> np.ndarray:
        return self.batcher.encode([texts] if isinstance(texts, str) else texts)

    def similarity_pairwise(self, texts_a: Sequence[str], texts_b: Sequence[str], **_) -> np.ndarray:
        texts_a, texts_b = list(texts_a), list(texts_b)
        if len(texts_a) != len(texts_b):
            raise ValueError(f"texts_a has {len(texts_a)} texts but texts_b has {len(texts_b)}")
        vectors = torch.from_numpy(self.encode(texts_a + texts_b))  # both sides in one call
        return self._model.score(vectors[: len(texts_a)], vectors[len(texts_a) :])
