"""Lazy package exports (PEP 562): ``import siamese`` costs nothing until a name is used, so the
CLI starts at once and every command imports only what it needs."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], names: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for the package whose ``globals()`` is
    ``namespace``: each public name lives in the given relative module, imported on first access
    (a name the module does not define is the module itself, e.g. ``"datasets": ".data.datasets"``; a function
    named as its module, ``"learn": ".training.learn"``, is the function)."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(names[name], package)
        value = getattr(module, name) if hasattr(module, name) else module
        namespace[name] = value  # later look-ups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__, sorted(names)
