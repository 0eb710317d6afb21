"""Active labelling: a local page that asks for the few labels that fix a model's threshold and
calibration on one's own data, and fine-tunes the model on them when that is not enough
(``siamese label``); see docs/labelling.md."""

from .selection import Candidates, Selector
from .session import LabelSession
from .store import Answer, LabelStore

__all__ = ["Answer", "Candidates", "LabelSession", "LabelStore", "Selector"]
