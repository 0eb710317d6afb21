"""HTTP service: FastAPI app over a model (and optionally a duplicate-search index)."""

from ..io.extras import require

for _module in ("fastapi", "uvicorn", "fastapi_offline", "prometheus_client"):  # the extra `serve`: one line if not
    require("serve", _module)

# ruff: noqa: E402 (the extra is checked before its modules are imported)

from .app import Limits, create_app
from .batcher import BatchConfig
from .security import api_keys
from .server import run

__all__ = ["BatchConfig", "Limits", "api_keys", "create_app", "run"]
