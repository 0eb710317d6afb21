"""Cross-encoders: both texts of a pair read together (the most accurate verdicts, pairs only).

- :mod:`.model`: :class:`CrossEncoder` (similarity / predict / save / load), :class:`CrossConfig`
- :mod:`.train`: :func:`train_cross` (configured by :class:`~siamese.config.configs.TrainConfig`, as every training)
"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "CrossConfig": ".model",
        "CrossEncoder": ".model",
        "train_cross": ".train",
    },
)
