"""The labelling page and its small JSON API, on the service's stack (FastAPI under uvicorn, the
service's body limits and security headers: siamese/serve/).

Routes: ``/`` the page, ``/health``, ``GET /api/next?tab=T`` (the pair to show tab T and the
statistics), ``POST /api/answer`` ``{"index", "label": "d"|"n"|"s", "tab"}`` (answered once the
row is on disk; ``saved``: whether it was written, false for a pair another tab answered first
and for a skip, which ``skipped`` tells and which is never written; then the next pair),
``POST /api/undo`` ``{"tab"}``, ``POST /api/save`` ``{"choice": "fitted"|"target"}``,
``POST /api/learn`` (start learning from the answers in the background:
siamese/label/learning.py; 409 while it runs) and ``GET /api/learn`` (how it goes: ``state``
idle, learning, done or failed, with a one-line ``message``). A user error is a 4xx with a
one-line ``detail``; docs/labelling.md#http-api documents every call for scripts.

Every ``/api/`` call must carry the run's token (``X-Siamese-Token``), which the page finds in
itself (a ``<meta name="siamese-token">`` filled in when it is served): a page of another site
can send requests to 127.0.0.1 (an ``<img>``, a form) but cannot read the page to learn it; and a
Host header naming another site (DNS rebinding) is refused (siamese.serve.security.HostCheck).
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import SiameseError
from ..serve.limits import BodyLimits, refuse
from ..serve.security import HostCheck, SecurityHeaders, local_names
from ..version import __version__
from .session import LabelSession

PAGE = Path(__file__).with_name("static") / "label.html"
LABELS = {"d": 1, "n": 0, "s": None}
TOKEN_HEADER = "x-siamese-token"
TOKEN_SLOT = '<meta name="siamese-token" content="">'


class AnswerRequest(BaseModel):
    index: int = Field(..., ge=0)
    label: str = Field(..., pattern="^[dns]$", description="d = duplicate, n = not a duplicate, s = skip")
    tab: str = Field("", max_length=64)


class TabRequest(BaseModel):
    tab: str = Field("", max_length=64)


class SaveRequest(BaseModel):
    choice: str = Field("fitted", pattern="^(fitted|target)$")


class PageToken:
    """ASGI middleware: 403 for an /api/ call without the run's token (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str, timeout: float):
        self.app, self.token, self.timeout = app, token.encode(), timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            given = dict(scope["headers"]).get(TOKEN_HEADER.encode(), b"")
            if not hmac.compare_digest(given, self.token):
                detail = "missing or wrong page token: reload the labelling page (it sends the token itself)"
                return await refuse(scope, receive, send, 403, detail, seconds=self.timeout)
        await self.app(scope, receive, send)


def create_app(
    session: LabelSession,
    *,
    read_timeout: float = 15.0,
    token: str | None = None,
    host_names: frozenset[str] | None = None,
) -> FastAPI:
    """The page and its API over ``session``. ``token``: what every /api/ call must send (default:
    a new random one; the page served at / carries it). ``host_names``: the names a request's Host
    may give beside IP addresses (None: this machine's, ``local_names()``, as ``siamese label`` gives; ``ANY_HOST``:
    any)."""
    token = token or secrets.token_urlsafe(24)
    page = PAGE.read_text(encoding="utf-8").replace(TOKEN_SLOT, TOKEN_SLOT.replace('""', f'"{token}"'))
    app = FastAPI(title="siamese label", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.token = token
    app.add_middleware(BodyLimits, max_bytes=16_384, timeout=read_timeout, max_items=16)
    app.add_middleware(PageToken, token=token, timeout=read_timeout)
    names = local_names() if host_names is None else host_names  # a rebinding page is refused by default
    app.add_middleware(HostCheck, names=names, hint="open the page at its address ({address})")
    app.add_middleware(SecurityHeaders, page=PAGE)

    @app.exception_handler(SiameseError)
    async def user_error(request, e: SiameseError):
        return JSONResponse({"detail": str(e)}, status_code=422)

    def state(pair: dict | None, **extra) -> JSONResponse:
        return JSONResponse({"pair": pair, "stats": session.stats(), "labels": str(session.store.path), **extra})

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def home():
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})  # its token is this run's

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
        saved = session.answer(req.index, LABELS[req.label], req.tab)  # a skip is not written: False
        session.stats()  # refitted first: the next pair's verdict is at the threshold the page shows
        return state(session.next(req.tab), saved=saved, skipped=req.label == "s")

    @app.post("/api/undo")
    def undo(req: TabRequest):
        shown = session.undo(req.tab)
        if shown is None:
            raise HTTPException(409, "nothing to undo in this tab (a tab undoes its own answers)")
        return state(shown if "index" in shown else session.next(req.tab), undone=True)

    @app.get("/api/learn")
    def learning():
        return {"learn": _learner().status()}

    @app.post("/api/learn")
    def learn():
        learner = _learner()
        if learner.status()["state"] == "learning":
            raise HTTPException(409, "already learning from the answers: it goes on in the background; keep labelling")
        return {"learn": learner.start()}

    def _learner():
        if session.learner is None:
            raise HTTPException(422, "this labelling session cannot learn from the answers")
        return session.learner

    @app.post("/api/save")
    def save(req: SaveRequest):
        return JSONResponse({"saved": session.save(req.choice), "stats": session.stats()})

    return app
