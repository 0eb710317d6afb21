"""Progress of a distillation where no bar is drawn (stderr a file or a pipe, see
:mod:`siamese.io.progress`): a line at least every ``SIAMESE_PROGRESS_SECONDS`` (default 30) saying
which step runs and how far it is, written by a background thread, so a slow step on a busy
machine still shows that it moves."""

from __future__ import annotations

import contextlib
import os
import threading
import time

from ..io.progress import interactive, tqdm

DEFAULT_SECONDS = 30.0


class Heartbeat:
    """The step under way and its count, printed every ``every`` seconds while :meth:`running`."""

    def __init__(self, every: float | None):
        self.every, self.started = every, time.perf_counter()
        self.step, self.done, self.total = "starting", 0, 0
        self._stop = threading.Event()

    def stage(self, step: str, total: int = 0) -> None:
        self.step, self.done, self.total = step, 0, total

    def advance(self, n: int) -> None:
        self.done += n

    def line(self) -> str:
        count = f" {self.done:,}/{self.total:,}" if self.total else ""
        return f"distill: {self.step}{count} ({time.perf_counter() - self.started:.0f} s)"

    @contextlib.contextmanager
    def running(self):
        if self.every is None:
            yield self
            return
        thread = threading.Thread(target=self._beat, name="siamese-heartbeat", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            tqdm.write(self.line())


def heartbeat(progress: bool) -> Heartbeat:
    """A heartbeat that prints only with ``progress`` and where no bar is drawn (else it only counts)."""
    every = float(os.environ.get("SIAMESE_PROGRESS_SECONDS") or DEFAULT_SECONDS)
    return Heartbeat(every if progress and not interactive() else None)
