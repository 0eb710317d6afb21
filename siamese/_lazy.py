"""Lazy package exports (PEP 562): ``import siamese`` costs nothing until a name is used, so the
CLI starts at once and every command imports only what it needs."""

from __future__ import annotations

import importlib


def lazy_exports(namespace: dict, names: dict[str, str]):
    """``__getattr__``, ``__dir__`` and ``__all__`` for the package whose ``globals()`` is
    ``namespace``: each public name lives in the given relative module, imported on first access
    (a name that is the module's own last part is the module itself, e.g. ``"datasets": ".data.datasets"``)."""
    package = namespace["__name__"]

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(names[name], package)
        value = module if module.__name__.rpartition(".")[2] == name else getattr(module, name)
        namespace[name] = value  # later look-ups skip __getattr__
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__, sorted(names)
