"""The HTTP API: similarity, search, embeddings (also OpenAI-compatible), health, metrics.

Thin by design: requests are validated (sizes limited, clear 4xx), then the Python API does the
work. Bad input never yields a 5xx. Around the handlers, from the outside in: metrics and the
access log (metrics.py), security headers and API keys (security.py), body limits and strict
JSON (limits.py); the model's encoding goes through the batcher (batching.py).
"""

from __future__ import annotations

import base64
import copy
import logging
import os
import threading
from collections.abc import Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio.to_thread
import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from ..decision.cascade import FIXED_BAND, BandSpec, check_band, is_cross, verifier_name, verify_pairs
from ..errors import ConfigError
from ..models.siamese import SiameseModel
from ..search import DuplicateIndex
from ..version import __version__
from .batcher import BatchConfig, BatchedModel, Batcher, Overloaded
from .limits import BodyLimits
from .metrics import Metrics, Observe
from .security import ApiKeys, HostCheck, SecurityHeaders, local_names

log = logging.getLogger("siamese.serve")


@dataclass(frozen=True)
class Limits:
    max_texts: int = 256  # texts (or pairs) per request, and items of any array in a request body
    max_chars: int = 2_000  # characters per text
    max_body_bytes: int = 1_000_000
    max_k: int = 100
    read_timeout: float = 15.0  # seconds for a request's headers, and again for its body (408)


HOST_HINT = "open it by its address ({address}), or start it with --allow-host NAME (behind a proxy)"


# As every threshold elsewhere (siamese.decision.threshold.check_threshold): a cosine, or a
# probability; strict, so "0.5" and true are refused rather than read as numbers.
def _threshold():
    return Field(None, ge=-1.0, le=1.0, strict=True, description="In [-1, 1]; null: the model's threshold")


class PairsRequest(BaseModel):
    pairs: list[tuple[str, str]] = Field(..., description="[[text_a, text_b], ...]")
    threshold: float | None = _threshold()
    explain: bool = Field(False, description="Add each pair's per-word weights (see siamese.evaluation.explain)")


# Explaining a pair re-encodes each text once per word (occlusion): far fewer pairs per request,
# and few requests explained at once (Python-heavy work: more threads at it only starve the event loop).
MAX_EXPLAINED_PAIRS = 8
EXPLAINING_AT_ONCE = 2


class SearchRequest(BaseModel):
    query: str
    k: int = Field(5, ge=1, strict=True)
    threshold: float | None = _threshold()


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
    host_names: frozenset[str] | None = None,
    verifier=None,
    verify_band: BandSpec = FIXED_BAND,
) -> FastAPI:
    """The service of ``model`` (and ``index``): the routes, the batcher every encoding goes
    through, the limits, API keys and metrics. ``host_names``: without API keys, the only names
    (beside IP addresses) a request's Host may give (see :mod:`siamese.serve.security`); None:
    this machine's (``local_names()``), as ``siamese serve`` gives; ``ANY_HOST``: any. ``verifier``: a
    stronger bi-encoder or a cross-encoder that decides the pairs /similarity scores within ``verify_band`` of the
    threshold (None: every pair; siamese.decision.cascade)."""
    limits, batching = limits or Limits(), batching or BatchConfig()
    host_names = local_names() if host_names is None else host_names  # a rebinding page is refused by default
    verifying = _verifying(verifier, verify_band)
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
    live = Reloader(model, index)

    @asynccontextmanager
    async def lifespan(app):
        # waiting requests each hold a worker thread: let the queue, not the thread pool, be the limit
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, batching.max_queue + 16)
        live.start()
        yield
        live.stop()
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
    routes = _add_middlewares(app, page, limits, metrics, api_keys, host_names)

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
            "index_size": len(live.index) if live.index is not None else None,
            "reload": live.problem,  # what changed on disk that a restart must take, or null
            "verifier": verifying,  # the model that decides the pairs in the band, or null
        }

    checks = _Checks(limits, cross)
    cascade = None if verifier is None else (verifier, verify_band)
    _pair_routes(app, model, checks, batcher, threading.BoundedSemaphore(EXPLAINING_AT_ONCE), cascade)
    _vector_routes(app, model, live, checks, model_name, limits)
    routes.update(route.path for route in app.routes)
    return app


def _verifying(verifier, band: BandSpec) -> dict | None:
    """What /health says of the verifier (None without one); the band checked: a width or None."""
    check_band(band)
    if band == "auto":
        raise ConfigError("a service's verify band is a width or None (every pair): 'auto' needs a sample of pairs")
    if verifier is None:
        return None
    return {
        "model": verifier_name(verifier),
        "kind": "cross-encoder" if is_cross(verifier) else "bi-encoder",
        "threshold": float(verifier.threshold),
        "band": band,  # a width around the threshold; null: every pair
    }


def _add_middlewares(
    app: FastAPI, page: Path, limits: Limits, metrics: Metrics, api_keys: Sequence[str], host_names
) -> set[str]:
    """The middlewares, outermost last (add_middleware wraps what is there); returns the set of
    route paths the metrics label requests by, filled once the routes exist."""
    app.add_middleware(
        BodyLimits, max_bytes=limits.max_body_bytes, timeout=limits.read_timeout, max_items=limits.max_texts
    )
    app.add_middleware(ApiKeys, keys=api_keys, timeout=limits.read_timeout)
    if not api_keys:  # with keys, a rebinding page has no key to send
        app.add_middleware(HostCheck, names=host_names, hint=HOST_HINT, timeout=limits.read_timeout)
    app.add_middleware(SecurityHeaders, page=page)
    routes: set[str] = set()
    app.add_middleware(Observe, metrics=metrics, routes=routes)
    return routes


class Reloader:
    """The model's threshold and calibration, and the index, as their folders now hold them:
    ``siamese calibrate`` and ``siamese index add`` (or ``index build --overwrite``) rewrite them
    while the service runs. A thread looks every ``every`` seconds (a stat of a few files) and
    loads what changed off the request path; requests then use it. New weights (a model trained
    again into the folder) are not swapped in: the log and /health's ``reload`` say to restart."""

    def __init__(self, model, index: DuplicateIndex | None, *, every: float = 2.0):
        if index is not None:
            index = copy.copy(index)  # the same FAISS index and texts, searched with ``model`` (batched)
            index.model = model
        self.model, self.index, self.every = model, index, every
        self.loaded = model._model if isinstance(model, BatchedModel) else model  # the model itself
        self.model_dir: Path | None = getattr(self.loaded, "path", None)
        self.index_dir: Path | None = getattr(index, "path", None)
        self.problem: str | None = None
        self._seen = self._signatures()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _signatures(self) -> tuple:
        return (
            _signature(self.model_dir, ("config.json",)),
            _signature(self.model_dir, ("model.safetensors", "0_Transformer/model.safetensors")),
            _signature(self.index_dir, ("index.json", "index.faiss", "texts.jsonl")),
        )

    def start(self) -> None:
        if (self.model_dir or self.index_dir) and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="siamese-reload", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.check()

    def check(self) -> None:
        """Load what changed on disk since the last look."""
        now = self._signatures()
        config, weights, index = (a != b for a, b in zip(now, self._seen))
        self._seen = now
        try:
            if weights:
                self.problem = f"{self.model_dir}: its weights changed on disk; restart siamese serve to serve them"
                log.warning(self.problem)
            elif config:
                self._reload_config()
            if index and not weights:
                self._reload_index()
        except Exception as e:  # a folder mid-change, damaged, or of another model: keep serving what we have
            self.problem = f"{str(e).splitlines()[0] if str(e) else type(e).__name__}; still serving the one loaded"
            log.warning(self.problem)

    def _reload_config(self) -> None:
        from ..models.loading import load_model

        fresh = load_model(self.model_dir, device="cpu")
        if fresh.fingerprint() != self.loaded.fingerprint():
            self.problem = f"{self.model_dir}: a different model is there now; restart siamese serve to serve it"
            log.warning(self.problem)
            return
        self.loaded.calibrator = fresh.calibrator
        self.loaded.set_threshold(fresh.threshold)
        self.problem = None
        log.info("%s: reloaded its threshold (%g) and calibration", self.model_dir, fresh.threshold)

    def _reload_index(self) -> None:
        fresh = DuplicateIndex.load(self.index_dir, self.model)  # searched with the batched model
        self.index = fresh
        self.problem = None
        log.info("%s: reloaded (%d texts)", self.index_dir, len(fresh))


def _signature(folder: Path | None, names: Sequence[str]) -> tuple:
    """What changes when a file is rewritten (atomically: a new inode) or edited."""
    if folder is None:
        return ()
    found = []
    for name in names:
        try:
            info = os.stat(folder / name)
        except OSError:
            continue
        found.append((name, info.st_ino, info.st_mtime_ns, info.st_size))
    return tuple(found)


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


def _pair_routes(app: FastAPI, model, checks: _Checks, batcher: Batcher | None, explaining, cascade) -> None:
    """/similarity: pairs scored (and explained, a few at a time), for both kinds of model; with a
    verifier (``cascade``: it and the band), the pairs in the band decided by it."""

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
        extra = {} if cascade is None else {"verify": _verified(model, cascade, batcher, req.pairs, t, scores, results)}
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
        return JSONResponse({"threshold": t, "results": results, **extra})


def _verified(model, cascade, batcher: Batcher | None, pairs, t: float, scores, results: list[dict]) -> dict:
    """The verifier's say on a request's pairs: each result's ``duplicate`` becomes the cascade's
    verdict (the first stage's kept as ``first_stage_duplicate``), with ``verified`` and
    ``verifier_score`` (null where not asked); returns what the verifier did. Its model call counts
    in the queue, as an explanation's does."""
    verifier, band = cascade
    with batcher.admitted() if batcher is not None else nullcontext():
        done = verify_pairs(
            model, verifier, [a for a, _ in pairs], [b for _, b in pairs], threshold=t, band=band, similarity=scores
        )
    for result, duplicate, verified, score in zip(results, done.duplicate, done.verified, done.verifier_score):
        result["first_stage_duplicate"] = result["duplicate"]
        result.update(
            duplicate=bool(duplicate), verified=bool(verified), verifier_score=float(score) if verified else None
        )
    keep = ("model", "verifier", "verifier_threshold", "band", "verified", "changed", "seconds")
    return {k: done.info[k] for k in keep}


def _vector_routes(app: FastAPI, model, live: Reloader, checks: _Checks, model_name: str, limits: Limits) -> None:
    """/search, /embed and the OpenAI-style /v1/embeddings: what needs a bi-encoder's vectors."""

    @app.post("/search")
    def search(req: SearchRequest):
        index = live.index
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
        if req.dimensions is not None and not 1 <= req.dimensions <= model.dim:
            raise HTTPException(422, f"'dimensions' is {req.dimensions}; this model gives 1 to {model.dim}")
        vectors = model.encode(texts)
        if req.dimensions is not None and req.dimensions < model.dim:  # the first ones, unit length, as OpenAI's
            vectors = vectors[:, : req.dimensions]
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
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
