"""Every configuration, each option declared once with :func:`option` (its flag, default, help
and bounds); ``siamese train`` is generated from these declarations.

- :mod:`.options`: :func:`option`, reading the declarations, building a configuration from them
- :mod:`.configs`: :class:`ModelConfig` (the architecture, saved as config.json), :class:`TrainConfig`
- :mod:`.loss`: :class:`LossConfig` (a loss's own margin and scale)
- :mod:`.static`: :class:`StaticConfig` (the distilled static student)

Imports nothing heavy (no torch): the command line reads these when it starts."""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "option": ".options",
        "ModelConfig": ".configs",
        "TrainConfig": ".configs",
        "KIND_DEFAULTS": ".configs",
        "LossConfig": ".loss",
        "StaticConfig": ".static",
    },
)
