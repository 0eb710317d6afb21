"""Request bodies read under limits: size counted as bytes arrive (413), a deadline (408), strict JSON (422).

An ASGI middleware in front of the app. It reads the whole body itself before the app sees the
request, so the limits hold whatever the transfer encoding (a chunked body has no Content-Length
to check) and a slow or half-sent body cannot hold a worker. The body is then checked as strict
JSON: Python's parser accepts NaN/Infinity, 1e400 (inf) and lone surrogates ("\\ud800"), which
later break the tokenizer or the JSON response (a 500); deep nesting exhausts its recursion.
"""

from __future__ import annotations

import asyncio
import json
import math

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_DEPTH = 32  # our requests nest 3 deep ({"pairs": [[a, b]]})
DRAIN_BYTES = 8_000_000  # a refused body up to this declared size is read and dropped, not cut off
DRAIN_SECONDS = 15.0  # ... if it arrives within this time


def _modest(scope: Scope) -> bool:
    """Whether a body is small enough to read and drop before an early answer. Closing with bytes
    unread resets the connection, and a client still sending (urllib, requests) then reports a
    broken pipe instead of our answer; a big or unsized body is cut off all the same."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    return declared.isdigit() and int(declared) <= DRAIN_BYTES


async def refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    detail: str,
    *,
    seconds: float = DRAIN_SECONDS,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer a request before its body was read: a modest body is first read (within ``seconds``)
    and dropped, so the connection stays usable; otherwise the answer closes it."""
    drained = _modest(scope) and await _drain(receive, seconds)
    await reply(send, status, detail, close=not drained, headers=headers)


async def _drain(receive: Receive, seconds: float) -> bool:
    """Read a request body to its end, keeping none of it; False if it did not end within ``seconds``."""
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            while (message := await receive())["type"] == "http.request" and message.get("more_body"):
                pass
    except TimeoutError:
        return False
    return True


class BadBody(ValueError):
    """A body Python's json would take but the API cannot: non-finite number, lone surrogate, deep nesting."""


class TooMany(ValueError):
    """An array longer than a request may hold (413): refused before the app validates each item,
    since a list of 300,000 wrongly typed items costs seconds of validation and a 30 MB error body."""


MAX_DIGITS = 30  # an integer in a request is a count or an index, never this long


async def reply(send: Send, status: int, detail: str, *, close: bool = False, headers: dict[str, str] | None = None):
    """A JSON error response; ``close`` when the rest of the body is left unread."""
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *([(b"connection", b"close")] if close else []),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _constant(name: str):
    raise BadBody(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadBody(f"number {text[:20]} is out of range")
    return value


def _integer(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise BadBody(f"integer {text[:20]}... has {digits} digits; at most {MAX_DIGITS}")
    return int(text)


def check_json(body: bytes, max_items: int | None = None) -> None:
    """Raise BadBody (or ValueError for malformed JSON) naming what and where; TooMany for an
    array of more than ``max_items``."""
    try:
        doc = json.loads(body, parse_constant=_constant, parse_float=_finite, parse_int=_integer)
    except RecursionError:
        raise BadBody(f"nested more than {MAX_DEPTH} levels deep") from None
    stack = [(doc, "body", 0)]  # iterative: the walk itself must not recurse
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadBody(f"nested more than {MAX_DEPTH} levels deep (at {where})")
        if isinstance(value, str):
            _check_text(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, f"{where} key {key[:20]!r}")
                stack.append((item, f"{where}.{key[:40]}", depth + 1))
        elif isinstance(value, list):
            if max_items is not None and len(value) > max_items:
                raise TooMany(f"{where} has {len(value)} items; at most {max_items} per request")
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))


def _check_text(text: str, where: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise BadBody(f"{where} holds a lone surrogate (\\u{ord(text[e.start]):04x}), which is not text") from None


def _json_type(scope: Scope) -> bool:
    """Whether the request says its body is JSON (or says nothing, which FastAPI reads as JSON)."""
    given = dict(scope["headers"]).get(b"content-type")
    if given is None:
        return True
    kind = given.split(b";")[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))


class BodyLimits:
    """ASGI middleware: at most ``max_bytes`` read within ``timeout`` seconds, then checked as JSON
    with arrays of at most ``max_items``."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout: float, max_items: int | None = None):
        self.app, self.max_bytes, self.timeout, self.max_items = app, max_bytes, timeout, max_items

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_big = f"request body over {self.max_bytes} bytes"
        declared = dict(scope["headers"]).get(b"content-length", b"")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await refuse(scope, receive, send, 413, too_big, seconds=deadline - loop.time())
        chunks, size, more = [], 0, True
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return await reply(send, 408, f"request body not received within {self.timeout:g} s", close=True)
            if message["type"] == "http.disconnect":
                return  # the client left: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await reply(send, 413, too_big, close=True)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body and scope["method"] in ("POST", "PUT", "PATCH"):
            if not _json_type(scope):
                given = dict(scope["headers"])[b"content-type"].decode("latin-1")[:60]
                return await reply(
                    send, 415, f"request body must be JSON sent as 'Content-Type: application/json', not {given!r}"
                )
            try:
                check_json(body, self.max_items)
            except TooMany as e:
                return await reply(send, 413, f"request body: {e}")
            except BadBody as e:
                return await reply(send, 422, f"request body: {e}")
            except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, too many digits
                return await reply(send, 422, f"request body is not valid JSON: {str(e)[:200]}")
            if b"content-type" not in dict(scope["headers"]):  # said nothing: read as the JSON it was checked to be
                scope = {**scope, "headers": [*scope["headers"], (b"content-type", b"application/json")]}

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # the app waits for a disconnect, as it would
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
