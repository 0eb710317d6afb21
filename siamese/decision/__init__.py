"""The decision after scoring: the threshold and the similarity → probability calibration,
chosen one way for every trainer.

- :mod:`.threshold`: the threshold maximising a metric, or meeting a target precision/recall (numpy only)
- :mod:`.calibrator`: a fitted calibration applied (numpy only: loading a model imports no scikit-learn)
- :mod:`.calibration`: fitting one (Platt, isotonic, their blend), calibration metrics
- :mod:`.decide`: the threshold and calibration after training, with sound fallbacks
- :mod:`.cascade`: verdicts in a cascade: a stronger model decides the pairs in a band of a fast one's similarity"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "choose_threshold": ".threshold",
        "Calibrator": ".calibrator",
        "fit_calibrator": ".calibration",
        "decide": ".decide",
        "verify_pairs": ".cascade",
    },
)
