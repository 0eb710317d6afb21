"""Progress output: bars and log lines on stderr, never stdout (``--json`` keeps stdout pure JSON).

Bars are drawn only where someone watches them (a terminal, or a notebook). When stderr is a file
or a pipe (a log, CI, a job scheduler), a bar's ``\\r`` redraws would flood the log, so each bar
becomes a plain line every :func:`interval` seconds instead (``$SIAMESE_PROGRESS_SECONDS``, default
15): what is done of the total, the rate and the time left, written by one background thread, so a
line comes even while a single long step runs. The interval counts from the last line the process
wrote, not from the bar's start, so a run of short steps, each under one interval, is not silent for
longer than that either. A bar that ran past one interval also writes a last line when it closes. Lines
written with ``tqdm.write`` (one per epoch) are kept as they are.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref

from tqdm.auto import tqdm as _tqdm

DEFAULT_INTERVAL = 15.0  # seconds between two lines of one bar when stderr is not a terminal
_said = [time.monotonic()]  # when this process last wrote a progress line (at first: when it loaded this module)


def interactive() -> bool:
    """True when stderr is a terminal or we run inside a Jupyter kernel."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def interval() -> float:
    """Seconds between two progress lines when stderr is not a terminal: ``$SIAMESE_PROGRESS_SECONDS``
    (a bad value is ignored: progress must never stop a command), else 15."""
    try:
        seconds = float(os.environ.get("SIAMESE_PROGRESS_SECONDS", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return seconds if math.isfinite(seconds) and seconds > 0 else DEFAULT_INTERVAL


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``: a time for a person to read."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def plural(unit: str) -> str:
    """``text`` -> ``texts``, ``batch`` -> ``batches``."""
    return unit + ("es" if unit.endswith(("s", "x", "ch", "sh")) else "s")


def _number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.1f}"


class _Nowhere:
    """Where a bar draws when lines replace it (the lines go to stderr, written by the ticker)."""

    def write(self, s):
        return len(s)

    def flush(self):
        pass


class _Ticker:
    """One daemon thread writing a line for every line-mode bar whose last line is an interval old."""

    def __init__(self):
        self.bars: weakref.WeakSet = weakref.WeakSet()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()  # a new bar: its interval may be shorter than the one slept on

    def add(self, bar: tqdm) -> None:
        with self.lock:
            self.bars.add(bar)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="siamese-progress", daemon=True)
                self.thread.start()
        self.wake.set()

    def discard(self, bar: tqdm) -> None:
        with self.lock:
            self.bars.discard(bar)

    def _run(self) -> None:
        while True:
            every = interval()
            if self.wake.wait(min(1.0, max(0.01, every / 4))):
                self.wake.clear()
                continue  # read the interval again before writing
            with self.lock:
                bars = list(self.bars)
            now = time.monotonic()
            for bar in bars:
                if now - bar._last_line >= every:
                    bar._write_line(now)


_ticker = _Ticker()


class tqdm(_tqdm):  # noqa: N801 - a drop-in for tqdm.auto.tqdm
    """tqdm on stderr: a bar when :func:`interactive`, else a line every :func:`interval` seconds."""

    def __init__(self, *args, disable: bool = False, file=None, **kwargs):
        self._lines = not disable and not interactive()
        self._out = file or sys.stderr
        self._started = time.monotonic()
        self._last_line = _said[0]  # a new step comes due an interval after the last line, whichever bar wrote it
        self._written = 0
        super().__init__(*args, disable=disable, file=_Nowhere() if self._lines else self._out, **kwargs)
        if self._lines:
            _ticker.add(self)

    def line(self, final: bool = False) -> str:
        """The progress line: ``desc: done/total unit (pct), rate, time left`` (or, at the end, the time taken)."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        done, total, unit = self.n, self.total, plural(self.unit)
        rate = done / elapsed
        head = f"{self.desc}: " if self.desc else ""
        if total:
            text = f"{head}{_number(done)}/{_number(total)} {unit} ({100 * done / total:.0f}%)"
        else:
            text = f"{head}{_number(done)} {unit}"
        if final:
            return f"{text} in {duration(elapsed)} ({rate:,.1f} {unit}/s)"
        if not done:
            return f"{text}, started {duration(elapsed)} ago"
        text += f", {rate:,.1f} {unit}/s"
        if total and done < total:
            text += f", {duration((total - done) / rate)} left"
        else:
            text += f", {duration(elapsed)} so far"
        postfix = getattr(self, "postfix", None)
        return f"{text}, {postfix}" if postfix else text

    def _write_line(self, now: float, final: bool = False) -> None:
        self._last_line = _said[0] = now
        self._written += 1
        try:
            self._out.write(self.line(final) + "\n")
            self._out.flush()
        except (OSError, ValueError):  # a closed or broken stderr: progress never stops the work
            _ticker.discard(self)

    def close(self):
        if getattr(self, "_lines", False) and not self.disable:
            _ticker.discard(self)
            if self._written:  # a bar that ran past one interval says when it finished
                self._write_line(time.monotonic(), final=True)
        super().close()

    @classmethod
    def write(cls, s, file=None, end="\n", nolock=False):
        _said[0] = time.monotonic()
        super().write(s, file=file or sys.stderr, end=end, nolock=nolock)
