"""``siamese serve``: the HTTP API over a model (and optionally a duplicate-search index)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import ConfigError
from .common import DeviceOpt, VerifyAllOpt, VerifyBandOpt, VerifyOpt, labelled_band_of, user_errors
from .common import verify_band as verify_band_choice


@user_errors
def serve(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    index_dir: Annotated[Optional[Path], typer.Option("--index", help="Index folder for /search.")] = None,
    host: str = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free one).")] = 8000,
    api_key: Annotated[
        Optional[list[str]],
        typer.Option(
            "--api-key",
            help=(
                "Require this key (repeat for several; default: $SIAMESE_API_KEYS, comma-separated) as "
                "'Authorization: Bearer KEY' or 'X-API-Key: KEY'. The page and /health stay open."
            ),
        ),
    ] = None,
    allow_host: Annotated[
        Optional[list[str]],
        typer.Option(
            "--allow-host",
            help=(
                "Without API keys, answer requests whose Host is this name too (repeat for several; behind a proxy). "
                "IP addresses, localhost and this machine's names are always answered; other names are refused, "
                "so that no page of another site reaches the server by DNS rebinding."
            ),
        ),
    ] = None,
    batching: Annotated[
        bool, typer.Option("--batching/--no-batching", help="Encode concurrent requests' texts in one model call.")
    ] = True,
    max_batch: Annotated[int, typer.Option(help="Texts per batched model call.")] = 128,
    batch_wait_ms: Annotated[float, typer.Option(help="How long a request waits for others to join its batch.")] = 2.0,
    max_queue: Annotated[int, typer.Option(help="Requests waiting for the model; more are answered 429.")] = 64,
    read_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds for a request's headers, and again for its body (408).")
    ] = 15.0,
    log_level: Annotated[
        str, typer.Option(help="critical, error, warning, info (one access line per request) or debug.")
    ] = "info",
    verify: VerifyOpt = None,
    verify_band: VerifyBandOpt = None,
    verify_all: VerifyAllOpt = False,
    device: DeviceOpt = "auto",
):
    """Serve the model over HTTP: /similarity, /search, /embed, /v1/embeddings, /health, /metrics, /docs.

    With --verify, /similarity's verdicts are a cascade's: the stronger model decides the pairs in the band."""
    from ..models.loading import load_model, load_verifier
    from ..search import DuplicateIndex
    from ..serve import BatchConfig, Limits, api_keys, create_app, run
    from ..serve.security import local_names

    if log_level.lower() not in ("critical", "error", "warning", "info", "debug"):
        raise ConfigError(f"--log-level must be critical, error, warning, info or debug, got {log_level!r}")
    config = BatchConfig(enabled=batching, max_batch=max_batch, wait_ms=batch_wait_ms, max_queue=max_queue)
    config.check()
    keys = api_keys(api_key)
    band = verify_band_choice(verify, verify_band, verify_all, sample=False)
    verifier = load_verifier(verify, device=device) if verify is not None else None
    model = load_model(model_dir, device=device)  # a bi-encoder, or a cross-encoder (/similarity only)
    band = labelled_band_of(band, model, verifier)
    if index_dir and getattr(model, "kind", None) == "cross":
        raise ConfigError("a cross-encoder has no vectors to search an index with; serve it without --index")
    index = DuplicateIndex.load(index_dir, model) if index_dir else None
    names = local_names(host, allow_host or ())
    app = create_app(
        model,
        index,
        Limits(read_timeout=read_timeout),
        batching=config,
        api_keys=keys,
        host_names=names,
        verifier=verifier,
        verify_band=band,
    )
    run(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        read_timeout=read_timeout,
        what=f"{model_dir}"
        + (f" + {index_dir}" if index_dir else "")
        + (f" verified by {verify}" if verify is not None else "")
        + (" (API keys required)" if keys else ""),
    )
