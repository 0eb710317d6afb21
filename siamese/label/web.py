"""The labelling page and its small JSON API, on the service's stack (FastAPI under uvicorn, the
service's body limits and security headers: siamese/serve/).

Routes: ``/`` the page, ``/health``, ``GET /api/next?tab=T`` (the pair to show tab T and the
statistics), ``POST /api/answer`` ``{"index", "label": "d"|"n"|"s", "tab"}`` (answered once the
row is on disk; then the next pair), ``POST /api/undo`` ``{"tab"}``, ``POST /api/save``
``{"choice": "fitted"|"target"}``. A user error is a 4xx with a one-line ``detail``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field

from ..errors import SiameseError
from ..serve.limits import BodyLimits
from ..serve.security import SecurityHeaders
from ..version import __version__
from .session import LabelSession

PAGE = Path(__file__).with_name("static") / "label.html"
LABELS = {"d": 1, "n": 0, "s": None}


class AnswerRequest(BaseModel):
    index: int = Field(..., ge=0)
    label: str = Field(..., pattern="^[dns]$", description="d = duplicate, n = not a duplicate, s = skip")
    tab: str = Field("", max_length=64)


class TabRequest(BaseModel):
    tab: str = Field("", max_length=64)


class SaveRequest(BaseModel):
    choice: str = Field("fitted", pattern="^(fitted|target)$")


def create_app(session: LabelSession, *, read_timeout: float = 15.0) -> FastAPI:
    app = FastAPI(title="siamese label", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimits, max_bytes=16_384, timeout=read_timeout, max_items=16)
    app.add_middleware(SecurityHeaders, page=PAGE)

    @app.exception_handler(SiameseError)
    async def user_error(request, e: SiameseError):
        return JSONResponse({"detail": str(e)}, status_code=422)

    def state(pair: dict | None, **extra) -> JSONResponse:
        return JSONResponse({"pair": pair, "stats": session.stats(), "labels": str(session.store.path), **extra})

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def home():
        return FileResponse(PAGE, media_type="text/html")

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health():
        return {"status": "ok", "version": __version__, "answers": len(session.store), "pairs": len(session.c)}

    @app.get("/api/next")
    def next_pair(tab: str = ""):
        if len(tab) > 64:
            raise HTTPException(422, "'tab' has more than 64 characters")
        return state(session.next(tab))

    @app.post("/api/answer")
    def answer(req: AnswerRequest):
        if req.index >= len(session.c):
            raise HTTPException(422, f"no pair {req.index}: there are {len(session.c)}")
        saved = session.answer(req.index, LABELS[req.label], req.tab)
        session.stats()  # refitted first: the next pair's verdict is at the threshold the page shows
        return state(session.next(req.tab), saved=saved)

    @app.post("/api/undo")
    def undo(req: TabRequest):
        shown = session.undo(req.tab)
        if shown is None:
            raise HTTPException(409, "nothing to undo")
        return state(shown if "index" in shown else session.next(req.tab), undone=True)

    @app.post("/api/save")
    def save(req: SaveRequest):
        return JSONResponse({"saved": session.save(req.choice), "stats": session.stats()})

    return app
