"""``siamese label``: the active labelling loop (a local page, or an oracle replay)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import ConfigError
from .common import DeviceOpt, FormatOpt, JsonOpt, ReuseOpt, Text1Opt, Text2Opt, TextColumnOpt, emit, user_errors


@user_errors
def label(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (read only: the labelled model is saved elsewhere).")],
    out: Annotated[
        Path, typer.Option("--out", help="Labels CSV: answers are appended to it; an existing one is resumed.")
    ],
    data: Annotated[
        Optional[Path], typer.Option("--data", help="Corpus (.txt, or a CSV/TSV column): label its nearest pairs.")
    ] = None,
    column: TextColumnOpt = None,
    pairs: Annotated[Optional[Path], typer.Option("--pairs", help="Label the pairs of this file instead.")] = None,
    save_to: Annotated[
        Optional[Path],
        typer.Option("--save-to", help="Folder the page's Save writes the model to (default: OUT's name + '-model')."),
    ] = None,
    learn_out: Annotated[
        Optional[Path],
        typer.Option(
            "--learn-out",
            help="Folder the page's Learn writes the learned model to (default: OUT's name + '-learned').",
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="--data: neighbours per text considered (as dedupe's -k).")] = 10,
    target_precision: Annotated[
        float, typer.Option("--target-precision", help="The precision the page finds a threshold for.")
    ] = 0.9,
    oracle_column: Annotated[
        Optional[str],
        typer.Option(
            "--oracle-column",
            help="Answer without a page, from this column: --pairs, its 0/1 label; --data, duplicates share its value.",
        ),
    ] = None,
    budget: Annotated[
        Optional[int], typer.Option("--budget", min=1, help="--oracle-column: stop when OUT holds this many answers.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the pair choice.")] = 0,
    reuse: ReuseOpt = None,
    host: str = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free one).")] = 8000,
    log_level: Annotated[str, typer.Option(help="critical, error, warning or info.")] = "info",
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Label your own pairs in a local page: a threshold and a calibration from the answers, or a fine-tuned model."""
    from ..label.run import open_session, replay_run

    if (oracle_column is None) != (budget is None):
        raise ConfigError("--oracle-column and --budget go together (an answer replay)")
    if log_level.lower() not in ("critical", "error", "warning", "info"):
        raise ConfigError(f"--log-level must be critical, error, warning or info, got {log_level!r}")
    session, columns = open_session(
        model_dir,
        out,
        data=data,
        column=column,
        pairs=pairs,
        save_to=save_to,
        learn_out=learn_out,
        k=k,
        target_precision=target_precision,
        seed=seed,
        reuse=reuse,
        format=format,
        text1=text1,
        text2=text2,
        device=device,
        oracle_column=oracle_column if pairs is not None else None,
    )
    if oracle_column is not None and budget is not None:
        report = replay_run(session, columns, oracle_column, budget)
        emit(report.result, as_json, report.lines)
        return
    from ..label.web import create_app
    from ..serve import run
    from ..serve.security import local_names

    run(
        create_app(session, host_names=local_names(host)),
        host=host,
        port=port,
        log_level=log_level.lower(),
        what=f"labelling {session.source} into {out}",
        note="open it in a browser",
    )
