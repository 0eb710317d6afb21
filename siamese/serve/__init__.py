"""HTTP service: FastAPI app over a model (and optionally a duplicate-search index)."""

from .app import Limits, create_app
from .batching import BatchConfig
from .security import api_keys
from .server import run

__all__ = ["BatchConfig", "Limits", "api_keys", "create_app", "run"]
