"""How good a model is: metrics on labelled pairs, batch scoring of a file, the HTML report,
word-level explanations and reference scorers.

- :mod:`.metrics`: classification and correlation metrics, :func:`evaluate`
- :mod:`.scoring`: a pair file of any size scored, streamed in chunks
- :mod:`.report`: an evaluation as one self-contained HTML page, the errors as CSV
- :mod:`.explain`: which words of two texts drove their similarity
- :mod:`.baselines`: TF-IDF cosine similarity"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "evaluate": ".metrics",
        "evaluate_pairs": ".metrics",
        "classification_report": ".metrics",
    },
)
