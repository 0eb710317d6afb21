"""Who may call the API (optional API keys), by which name (the Host header), and what a browser
may do with our answers (security headers).

With keys set, every request needs ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, except
the web page itself and /health (load balancers probe it). The page's own calls then need a key too:
it asks for one when /health says ``api_key_required``.

Without keys, a page of another site can still reach a server on 127.0.0.1 by DNS rebinding (its
own name made to point at 127.0.0.1): the browser then sends that name as ``Host``, and
:class:`HostCheck` refuses it. Names accepted: an IP address, ``localhost``, this machine's names,
the name the server was told to listen on, and those given (``--allow-host``, behind a proxy).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConfigError
from .limits import refuse

OPEN_PATHS = frozenset({"/", "/health"})
ENV_KEYS = "SIAMESE_API_KEYS"


def api_keys(given: Iterable[str] | None) -> list[str]:
    """The keys from the command line, else from $SIAMESE_API_KEYS (comma-separated); [] = no auth.
    $SIAMESE_API_KEYS holding no key (``" , ,"``) is an error, not an open server."""
    keys = list(given or [])
    if not keys and os.environ.get(ENV_KEYS, ""):  # set to "": as if unset
        keys = [k.strip() for k in os.environ[ENV_KEYS].split(",") if k.strip()]
        if not keys:
            raise ConfigError(
                f"${ENV_KEYS} is set but holds no key ({os.environ[ENV_KEYS]!r}); give comma-separated keys, "
                "or unset it to serve without keys"
            )
    for key in keys:
        if len(key) < 8 or not key.isprintable() or not key.isascii() or " " in key:
            raise ConfigError("an API key must be at least 8 printable ASCII characters without spaces")
    return keys


class ApiKeys:
    """ASGI middleware: 401 for requests without a valid key (when keys are set)."""

    def __init__(self, app: ASGIApp, *, keys: Iterable[str], timeout: float = 15.0):
        self.app = app
        self.keys = [k.encode() for k in keys]
        self.timeout = timeout  # for reading and dropping a refused request's body

    def allowed(self, scope: Scope) -> bool:
        headers = dict(scope["headers"])
        given = headers.get(b"x-api-key")
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if given is None and scheme.lower() == b"bearer":
            given = token.strip()
        # compare_digest against every key: the time taken does not tell which bytes matched
        return given is not None and any([hmac.compare_digest(given, key) for key in self.keys])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        open_path = (scope.get("path", "").rstrip("/") or "/") in OPEN_PATHS  # /health/ is /health
        if scope["type"] != "http" or not self.keys or open_path or self.allowed(scope):
            return await self.app(scope, receive, send)
        await refuse(
            scope,
            receive,
            send,
            401,
            "missing or invalid API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
            seconds=self.timeout,
            headers={"WWW-Authenticate": "Bearer"},
        )


def host_name(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:8000`` -> ``::1``), lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def local_names(host: str = "", extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a request's Host may give: localhost, this machine's names, ``host`` (what the
    server listens on) when it is a name, and ``extra``."""
    names = {"localhost", socket.gethostname().lower(), host.lower(), *(e.lower() for e in extra)}
    try:
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return frozenset(n for n in names if n)


# host_names that let any Host through (a server behind a proxy that checks it; a test client's "testserver")
ANY_HOST = frozenset({"*"})


# a name or a bracketed IPv6 address, then at most a port of digits (``localhost:abc`` is no Host of ours)
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[^:\[\]]+|[0-9a-f:]*:[0-9a-f:.]*)(:[0-9]{1,5})?")


def allowed_host(header: str, names: frozenset[str]) -> bool:
    name = host_name(header)
    if "*" in names or not name:
        return True
    if not _HOST.fullmatch(header.strip().lower()):
        return False
    if name in names or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
        return True  # an address is not a name another site can point at us
    except ValueError:
        return False


class HostCheck:
    """ASGI middleware: 421 for a request whose Host header is a name this server does not go by
    (DNS rebinding: see the module docstring)."""

    def __init__(self, app: ASGIApp, *, names: frozenset[str], hint: str = "", timeout: float = 15.0):
        """``hint``: what to do instead; ``{address}`` in it becomes the server's own address."""
        self.app, self.names, self.hint, self.timeout = app, names, hint, timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not allowed_host(host, self.names):
                server = scope.get("server") or ("127.0.0.1", 0)
                address = f"http://{'[' + server[0] + ']' if ':' in server[0] else server[0]}:{server[1]}/"
                hint = self.hint.replace("{address}", address)
                detail = f"this server does not answer to the name {host[:80]!r}" + (f"; {hint}" if hint else "")
                return await refuse(scope, receive, send, 421, detail, seconds=self.timeout)
        await self.app(scope, receive, send)


def inline_hashes(page: Path) -> str:
    """CSP sources for the page's inline <script> and <style> blocks, so nothing else inline runs."""
    html = page.read_text(encoding="utf-8")
    sources = {}
    for tag in ("script", "style"):
        digests = [
            base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            for body in re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
        ]
        sources[tag] = " ".join(f"'sha256-{d}'" for d in digests) or "'none'"
    return (
        f"default-src 'none'; script-src {sources['script']}; style-src {sources['style']}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


# /docs loads Swagger UI from our own /docs-files and starts it with an inline script
DOCS_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; worker-src blob:; frame-ancestors 'none'"
)
API_CSP = "default-src 'none'; frame-ancestors 'none'"


class SecurityHeaders:
    """ASGI middleware: the same protective headers on every response, a CSP fitting each kind."""

    def __init__(self, app: ASGIApp, *, page: Path):
        self.app = app
        self.page_csp = inline_hashes(page)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        csp = self.page_csp if path == "/" else DOCS_CSP if path == "/docs" else API_CSP
        extra = [
            (b"content-security-policy", csp.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"no-referrer"),
            (b"cross-origin-resource-policy", b"same-origin"),
        ]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
