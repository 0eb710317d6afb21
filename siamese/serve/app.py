"""The HTTP API: similarity, search, embeddings (also OpenAI-compatible), health, metrics.

Thin by design: requests are validated (sizes limited, clear 4xx), then the Python API does the
work. Bad input never yields a 5xx. Around the handlers, from the outside in: metrics and the
access log (metrics.py), security headers and API keys (security.py), body limits and strict
JSON (limits.py); the model's encoding goes through the batcher (batching.py).
"""

from __future__ import annotations

import base64
import copy
import threading
from collections.abc import Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio.to_thread
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from ..errors import ConfigError
from ..model import SiameseModel
from ..search import DuplicateIndex
from ..version import __version__
from .batching import BatchConfig, BatchedModel, Batcher, Overloaded
from .limits import BodyLimits
from .metrics import Metrics, Observe
from .security import ApiKeys, SecurityHeaders


@dataclass(frozen=True)
class Limits:
    max_texts: int = 256  # texts (or pairs) per request, and items of any array in a request body
    max_chars: int = 2_000  # characters per text
    max_body_bytes: int = 1_000_000
    max_k: int = 100
    read_timeout: float = 15.0  # seconds for a request's headers, and again for its body (408)


# a threshold is on the head's scale (a cosine, a probability, a cross-encoder's logit): never near this
THRESHOLD_BOUND = 1e6


class PairsRequest(BaseModel):
    pairs: list[tuple[str, str]] = Field(..., description="[[text_a, text_b], ...]")
    threshold: float | None = Field(None, ge=-THRESHOLD_BOUND, le=THRESHOLD_BOUND)
    explain: bool = Field(False, description="Add each pair's per-word weights (see siamese.explain)")


# Explaining a pair re-encodes each text once per word (occlusion): far fewer pairs per request,
# and few requests explained at once (Python-heavy work: more threads at it only starve the event loop).
MAX_EXPLAINED_PAIRS = 8
EXPLAINING_AT_ONCE = 2


class SearchRequest(BaseModel):
    query: str
    k: int = Field(5, ge=1)
    threshold: float | None = Field(None, ge=-THRESHOLD_BOUND, le=THRESHOLD_BOUND)


class EmbedRequest(BaseModel):
    texts: list[str]


class OpenAIEmbeddingRequest(BaseModel):
    input: str | list[str]
    model: str | None = None
    encoding_format: str = "float"
    dimensions: int | None = None
    user: str | None = None


def create_app(
    model: SiameseModel,
    index: DuplicateIndex | None = None,
    limits: Limits | None = None,
    *,
    batching: BatchConfig | None = None,
    api_keys: Sequence[str] = (),
) -> FastAPI:
    """The service of ``model`` (and ``index``): the routes, the batcher every encoding goes
    through, the limits, API keys and metrics."""
    limits, batching = limits or Limits(), batching or BatchConfig()
    metrics = Metrics()
    model_name = model.path.name if model.path else "siamese"
    # A cross-encoder (siamese.cross) scores pairs only: /similarity, no vectors, so no batcher of
    # texts to encode (each request's pairs are one call) and no index.
    cross = getattr(model, "kind", None) == "cross"
    if cross and index is not None:
        raise ConfigError("a cross-encoder has no vectors to search an index with; serve it without --index")
    batcher = None if cross else Batcher(model.encode, batching, on_batch=metrics.observe_batch)
    if not cross:
        model = BatchedModel(model, batcher)  # the handlers below encode through the batcher
    if index is not None:
        index = copy.copy(index)  # the same FAISS index and texts, searched with the batched model
        index.model = model

    @asynccontextmanager
    async def lifespan(app):
        # waiting requests each hold a worker thread: let the queue, not the thread pool, be the limit
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, batching.max_queue + 16)
        yield
        if batcher is not None:
            batcher.close()

    # /docs from Swagger UI's files on our own disk (PyPI fastapi-offline), not FastAPI's CDN:
    # a service without internet still shows its API docs. ReDoc (CDN only) is left out.
    app = FastAPI(
        title="siamese",
        version=__version__,
        description="Siamese similarity service",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    page = Path(__file__).with_name("static") / "index.html"
    add_api_docs(app)
    # add_middleware wraps what is there: the last added runs first
    app.add_middleware(
        BodyLimits, max_bytes=limits.max_body_bytes, timeout=limits.read_timeout, max_items=limits.max_texts
    )
    app.add_middleware(ApiKeys, keys=api_keys, timeout=limits.read_timeout)
    app.add_middleware(SecurityHeaders, page=page)
    routes: set[str] = set()  # filled once the routes below exist
    app.add_middleware(Observe, metrics=metrics, routes=routes)

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, e: Overloaded):
        return JSONResponse({"detail": f"server busy: {e}"}, status_code=429, headers={"Retry-After": "1"})

    # The cheap GET routes are async: they run on the event loop, so a health probe is answered
    # while every worker thread waits for the model. GET routes answer HEAD too.
    @app.api_route("/metrics", methods=["GET", "HEAD"], include_in_schema=False)
    async def prometheus_metrics():
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def home():
        return FileResponse(page, media_type="text/html")

    # HEAD is left out of the schema: one route with both methods gives two operations of one id
    @app.head("/health", include_in_schema=False)
    @app.get("/health")
    async def health():
        return {
            "status": "ok",
            "version": __version__,
            "model": model_name,
            "threshold": model.threshold,
            "calibrated": model.calibrator is not None,
            "api_key_required": bool(api_keys),
            "index_size": len(index) if index is not None else None,
        }

    checks = _Checks(limits, cross)
    _pair_routes(app, model, checks, batcher, threading.BoundedSemaphore(EXPLAINING_AT_ONCE))
    _vector_routes(app, model, index, checks, model_name, limits)
    routes.update(route.path for route in app.routes)
    return app


class _Checks:
    """What every route checks of a request's texts, within the server's limits; a message names
    the item as the request holds it."""

    def __init__(self, limits: Limits, cross: bool):
        self.limits, self.cross = limits, cross

    def needs_vectors(self) -> None:
        if self.cross:
            raise HTTPException(400, "this model is a cross-encoder: it scores pairs (/similarity) and has no vectors")

    def texts(self, items: Sequence[str] | Sequence[tuple[str, str]], field: str) -> None:
        """Items are texts, or pairs of texts."""
        if not items:
            raise HTTPException(422, f"'{field}' is empty")
        if len(items) > self.limits.max_texts:
            raise HTTPException(413, f"'{field}' has {len(items)} items; at most {self.limits.max_texts} per request")
        for i, item in enumerate(items):
            for j, t in [(None, item)] if isinstance(item, str) else enumerate(item):
                self.text(t, f"'{field}'[{i}]" + (f"[{j}]" if j is not None else ""))

    def text(self, text: str, where: str) -> None:
        if len(text) > self.limits.max_chars:
            raise HTTPException(413, f"{where} has {len(text)} characters; at most {self.limits.max_chars}")
        if not text.strip():
            raise HTTPException(422, f"{where} is empty")


def _pair_routes(app: FastAPI, model, checks: _Checks, batcher: Batcher | None, explaining) -> None:
    """/similarity: pairs scored (and explained, a few at a time), for both kinds of model."""

    # The handlers below return a JSONResponse: its JSON is then written in the handler's worker
    # thread; a plain dict would be converted on the event loop (~0.1 s for 256 vectors), where
    # it holds up every other request.
    @app.post("/similarity")
    def similarity(req: PairsRequest):
        checks.texts(req.pairs, "pairs")
        t = model.threshold if req.threshold is None else req.threshold
        scores = model.similarity_pairwise([a for a, _ in req.pairs], [b for _, b in req.pairs])
        # probability: calibrated duplicate probability, null when the model is not calibrated
        probabilities = model.calibrator(scores).tolist() if model.calibrator is not None else [None] * len(scores)
        results = [
            {"similarity": float(s), "probability": p, "duplicate": bool(s > t)} for s, p in zip(scores, probabilities)
        ]
        if req.explain:
            if len(req.pairs) > MAX_EXPLAINED_PAIRS:
                raise HTTPException(
                    422, f"'explain' is for at most {MAX_EXPLAINED_PAIRS} pairs per request, got {len(req.pairs)}"
                )
            # explaining re-encodes each text once per word, beside the batcher: it waits in its queue's count
            with batcher.admitted() if batcher is not None else nullcontext(), explaining:
                for result, (a, b) in zip(results, req.pairs):
                    # the explanation states the result's similarity: one number per pair
                    result["explanation"] = model.explain(a, b, similarity=result["similarity"]).to_dict()
        return JSONResponse({"threshold": t, "results": results})


def _vector_routes(app: FastAPI, model, index, checks: _Checks, model_name: str, limits: Limits) -> None:
    """/search, /embed and the OpenAI-style /v1/embeddings: what needs a bi-encoder's vectors."""

    @app.post("/search")
    def search(req: SearchRequest):
        if index is None:
            raise HTTPException(404, "this server has no index; start it with --index")
        checks.text(req.query, "'query'")
        if req.k > limits.max_k:
            raise HTTPException(422, f"'k' is {req.k}; at most {limits.max_k}")
        hits = index.search([req.query], req.k, threshold=req.threshold)[0]
        return JSONResponse({"query": req.query, "hits": [asdict(h) for h in hits]})

    @app.post("/embed")
    def embed(req: EmbedRequest):
        checks.needs_vectors()
        checks.texts(req.texts, "texts")
        vectors = model.encode(req.texts)
        return JSONResponse({"dim": int(vectors.shape[1]), "embeddings": vectors.tolist()})

    @app.post("/v1/embeddings")
    def openai_embeddings(req: OpenAIEmbeddingRequest):
        checks.needs_vectors()
        texts = [req.input] if isinstance(req.input, str) else req.input
        checks.texts(texts, "input")
        if req.encoding_format not in ("float", "base64"):
            raise HTTPException(422, f"encoding_format must be 'float' or 'base64', got {req.encoding_format!r}")
        if req.dimensions is not None and req.dimensions != model.dim:
            raise HTTPException(422, f"this model gives {model.dim} dimensions, not {req.dimensions}")
        vectors = model.encode(texts)
        tokens = sum(len(ids) for ids in model.vectorizer.encode(texts))
        data = []
        for i, v in enumerate(vectors):
            emb = (
                base64.b64encode(v.astype("<f4").tobytes()).decode() if req.encoding_format == "base64" else v.tolist()
            )
            data.append({"object": "embedding", "index": i, "embedding": emb})
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": req.model or model_name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def add_api_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI (5.x: it reads FastAPI's OpenAPI 3.1) from the files the PyPI package
    fastapi-offline ships, served under ``/docs-files``."""
    from importlib.resources import files

    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    app.mount("/docs-files", StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-files")

    @app.api_route("/docs", methods=["GET", "HEAD"], include_in_schema=False)
    def api_docs():
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="siamese — HTTP API",
            swagger_js_url="/docs-files/swagger-ui-bundle.js",
            swagger_css_url="/docs-files/swagger-ui.css",
            swagger_favicon_url="/docs-files/favicon.png",
        )
