"""What every command family shares (siamese/emoji/cli.py too): the common options, the
``error: ...`` / exit 2 wrapper, ``--out`` checks, pair reading and result printing.

Imports only Typer and siamese.errors: a command module, and the emoji commands, import this
without importing the app (siamese/cli/root.py), so there is no cycle."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import SiameseError

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FormatOpt = Annotated[str, typer.Option("--format", help="Data format: auto, quora, generic, msrp, paws, twitter-url, sick, sts, semeval, mqp.")]
Text1Opt = Annotated[Optional[str], typer.Option("--text1", help="Column holding the first text.")]
Text2Opt = Annotated[Optional[str], typer.Option("--text2", help="Column holding the second text.")]
LabelOpt = Annotated[Optional[str], typer.Option("--label", help="Column holding the 0/1 label.")]
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace --out even when it is a folder of other files (by default only a siamese folder is replaced).")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto (a GPU when there is one, else the CPU), cpu, cuda, cuda:N or mps.")]
EngineOpt = Annotated[str, typer.Option("--engine", help="local (this process) or ray (a Ray cluster: Ray Data actors, one model each; pip install 'siamese[ray]').")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="--engine ray: the cluster to join (ray://HOST:10001 or HOST:6379; default: a local cluster on this machine's CPUs).")]
TargetPrecisionOpt = Annotated[Optional[float], typer.Option(
    "--target-precision", help="Set the threshold to the lowest one reaching this precision on the pairs (error if none does).")]
TargetRecallOpt = Annotated[Optional[float], typer.Option(
    "--target-recall", help="Set the threshold to the highest one reaching this recall on the pairs.")]


def user_errors(fn):
    """Turn a SiameseError into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SiameseError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except OSError as e:  # unreadable input, full disk...: the file and the reason, on one line
            where = f"{e.filename}: " if e.filename else ""
            typer.echo(f"error: {where}{e.strerror or e}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse a bad --out before any work is done (saving checks it again)."""
    from ..atomic import check_target

    check_target(out, overwrite=overwrite)


def _read(path: Path, format: str, text1, text2, label):
    from ..data import read_pairs

    return read_pairs(path, format, text1=text1, text2=text2, label=label)


def _emit(result: dict, as_json: bool, lines: list[str]) -> None:
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))  # emojis and texts stay readable characters
    else:
        typer.echo("\n".join(lines))

