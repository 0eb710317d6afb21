"""The JSON file that describes a saved folder (a model's config.json, an index's index.json),
read and checked field by field."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path


def read_json_object(file: Path, error: type[Exception], what: str = "a JSON object", kind: type = dict):
    """Parse ``file`` as a JSON object (or another ``kind``, e.g. list), else raise ``error`` with
    a one-line message naming it."""
    try:
        if file.stat().st_size > MAX_BYTES:
            raise error(f"{file}: {file.stat().st_size:,} bytes, too large for a manifest")
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{file}: invalid JSON ({e})") from None
    except RecursionError:
        raise error(f"{file}: JSON nested too deeply") from None
    except OSError as e:
        raise error(f"{file}: cannot read ({e.strerror or e})") from None
    if not isinstance(raw, kind):
        raise error(f"{file}: expected {what}")
    return raw


def read_manifest(folder: Path, name: str, fmt: str, error: type[Exception], what: str) -> dict:
    """Read ``folder/name``, check it is a JSON object of format ``fmt``; else raise ``error``
    with a one-line message naming the file."""
    file = folder / name
    if not file.is_file():
        raise error(f"{folder}: not a siamese {what} folder (no {name})")
    raw = read_json_object(file, error)
    if raw.get("format") != fmt:
        raise error(f"{file}: unsupported {what} format {raw.get('format')!r} (expected {fmt})")
    return raw


MAX_BYTES = 64 << 20  # a manifest is a few KB; a huge one is not read into memory


@dataclass(frozen=True)
class Field:
    """What a manifest field may hold: its JSON type (``int``, ``float``, ``bool``, ``str``, ``dict``,
    ``list`` of ``item``), whether null is allowed, and an inclusive numeric range (for a list: of its items)."""

    kind: type
    optional: bool = False
    lo: float | None = None
    hi: float | None = None
    item: type | None = None


def _type_ok(value, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_fields(raw: dict, spec: dict[str, Field], file: Path, error: type[Exception], *, prefix: str = "") -> None:
    """Check each field of ``spec`` present in ``raw`` (type, null, range); else raise ``error``
    with a one-line message naming the file and field (``prefix``: where ``raw`` sits in the file)."""
    for name, f in spec.items():
        if name not in raw or (raw[name] is None and f.optional):
            continue
        value = raw[name]
        items = value if f.kind is list and isinstance(value, list) else [value]
        ok = (
            _type_ok(value, f.kind) and all(_type_ok(v, f.item) for v in value)
            if f.kind is list and f.item
            else _type_ok(value, f.kind)
        )
        numbers = [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]
        in_range = all((f.lo is None or v >= f.lo) and (f.hi is None or v <= f.hi) for v in numbers)
        if not ok or not in_range:
            what = f.kind.__name__ + (f" of {f.item.__name__}" if f.item else "")
            bounds = (
                f" in [{f.lo:g}, {f.hi:g}]"
                if f.lo is not None and f.hi is not None
                else (f" >= {f.lo:g}" if f.lo is not None else "")
            )
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise error(
                f"{file}: field {prefix + name!r} must be {'null or ' if f.optional else ''}{what}{bounds}, got {shown}"
            )
