"""Progress output: bars and log lines on stderr, never stdout (``--json`` keeps stdout pure JSON).

Bars are drawn only where someone watches them (a terminal, or a notebook): when stderr is a file
or a pipe, a bar's ``\\r`` redraws would flood the log, so only the one-line messages written with
``tqdm.write`` (one per epoch) are kept."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm as _tqdm


def interactive() -> bool:
    """True when stderr is a terminal or we run inside a Jupyter kernel."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


class tqdm(_tqdm):  # noqa: N801 - a drop-in for tqdm.auto.tqdm
    """tqdm on stderr, drawn only when :func:`interactive`."""

    def __init__(self, *args, disable: bool = False, file=None, **kwargs):
        super().__init__(*args, disable=disable or not interactive(), file=file or sys.stderr, **kwargs)

    @classmethod
    def write(cls, s, file=None, end="\n", nolock=False):
        super().write(s, file=file or sys.stderr, end=end, nolock=nolock)
