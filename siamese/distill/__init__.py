"""Distillation into a static student: a teacher's sentence vectors learned by a bag of token
vectors that encodes at bag-of-words speed (``siamese distill``).

- :mod:`.corpus`: the texts the student learns from (default: the shared pair sets, no test split)
- :mod:`.static`: the student itself (:func:`distill_static`; its settings: :class:`siamese.config.static.StaticConfig`)
- :mod:`.pipeline` :func:`distill`: teacher by name or folder → student → optional fine-tune on labelled pairs →
  threshold chosen on validation pairs, ready to save.
"""

from __future__ import annotations

from .._lazy import lazy_exports

# Names resolve on first use: importing this package (e.g. for StaticConfig's defaults in the CLI)
# must not import torch.
__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "StaticConfig": "..config.static",
        "VOCABULARIES": "..config.static",
        "default_corpus": ".corpus",
        "read_corpus": ".corpus",
        "distill_static": ".static",
        "distill": ".pipeline",
    },
)
