"""The JSON file that describes a saved folder (a model's config.json, an index's index.json)."""

from __future__ import annotations

import json
from pathlib import Path


def read_json_object(file: Path, error: type[Exception], what: str = "a JSON object", kind: type = dict):
    """Parse ``file`` as a JSON object (or another ``kind``, e.g. list), else raise ``error`` with
    a one-line message naming it."""
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{file}: invalid JSON ({e})") from None
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
