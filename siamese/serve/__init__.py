"""HTTP service: FastAPI app over a model (and optionally a duplicate-search index)."""

from .app import Limits, create_app

__all__ = ["Limits", "create_app"]
