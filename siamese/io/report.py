"""What a run from files to a folder tells its caller: :class:`RunReport`, the result as JSON
(what ``--json`` prints) and as lines for a person, and the object it made."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunReport:
    """``result``: JSON (sizes, scores, where it was written, ...); ``lines``: the same for a
    person; ``value``: what the run made (a model, a dedupe run), when there is one."""

    result: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    value: Any = None
