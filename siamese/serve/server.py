"""Run the app under uvicorn: a deadline for every phase of a connection, logs on stderr.

Phases: the request line and headers must arrive within ``read_timeout`` (below), the body
within it too (limits.BodyLimits, 408), and an idle keep-alive connection is closed after
``keep_alive`` seconds (uvicorn's timeout_keep_alive).
"""

from __future__ import annotations

import logging
import socket

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import ConfigError

log = logging.getLogger("siamese.serve")
LEVELS = ("critical", "error", "warning", "info", "debug")


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the request line and headers (and for the rest
    of a body answered early). uvicorn arms its keep-alive timer only after a response, and any
    byte received cancels it, so a client trickling a header would hold the connection for ever."""

    read_timeout = 15.0
    _header_timer = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.read_timeout, self._headers_late)

    def _headers_late(self) -> None:
        # no request in progress: its headers are late, or an answered request's body is still
        # trickling in (uvicorn reads and drops it, and any byte would reset its keep-alive timer)
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            log.info("closing a connection whose request did not arrive within %g s", self.read_timeout)
            self.transport.close()


def logging_config(level: str) -> dict:
    """uvicorn's messages and ours (siamese.access: one line per request) on stderr at ``level``."""
    level = level.upper()
    stderr = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"stderr": stderr},
        "loggers": {
            name: {"handlers": ["stderr"], "level": level, "propagate": False}
            for name in ("uvicorn", "uvicorn.error", "siamese.access", "siamese.serve", "siamese.label")
        },
    }


def check_address(host: str, port: int) -> None:
    """One line (ConfigError) when host:port cannot be listened on: an unknown host, an address
    not of this machine, a port in use."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port} ({e.strerror or e})") from None


# seconds that requests in flight get to finish once the server is told to stop (SIGTERM, Ctrl-C)
GRACEFUL_SHUTDOWN_S = 5


def run(
    app,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    read_timeout: float = 15.0,
    keep_alive: int = 5,
    what: str = "",
    note: str = "docs at /docs, metrics at /metrics",
) -> None:
    """Serve ``app`` on host:port until interrupted; logs the address it listens on, and ``note``."""
    protocol = type("TimedH11Protocol", (TimedH11Protocol,), {"read_timeout": read_timeout})
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        log_config=logging_config(log_level),
        log_level=log_level,
        access_log=False,
        timeout_keep_alive=keep_alive,
        server_header=False,
        # On SIGTERM or Ctrl-C, requests in flight get this long to finish, then are cancelled: a queue of
        # abandoned requests kept the process encoding for minutes past `docker stop`'s 10 s.
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    check_address(host, port)  # uvicorn would log a bind error and exit 1 or 3 instead of one line and 2
    sock = config.bind_socket()  # bound here: the log names the real port, even for --port 0
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    log.info(
        "serving %son http://%s:%d/%s", f"{what} " if what else "", shown, bound_port, f" ({note})" if note else ""
    )
    uvicorn.Server(config).run(sockets=[sock])
