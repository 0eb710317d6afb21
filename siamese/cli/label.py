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
    from ..io.atomic import check_not_input, check_target

    if (data is None) == (pairs is None):
        raise ConfigError("give --data CORPUS (label its nearest pairs) or --pairs FILE, not both")
    if reuse is not None and data is None:
        raise ConfigError("--reuse takes the vectors of --data's texts; --pairs files are encoded as they are")
    if (oracle_column is None) != (budget is None):
        raise ConfigError("--oracle-column and --budget go together (an answer replay)")
    source = data or pairs
    save_to = save_to or out.with_name(out.stem + "-model")
    learn_out = learn_out or out.with_name(out.stem + "-learned")
    for path in (out, save_to, learn_out):
        check_not_input(path, [source, model_dir])
    for name, folder in (("--save-to", save_to), ("--learn-out", learn_out)):
        if folder.absolute() == out.absolute() or (folder.exists() and out.exists() and folder.samefile(out)):
            raise ConfigError(f"{name} {folder}: is the labels file (--out); the model needs a folder of its own")
        check_target(folder, kind="model")
    if learn_out.absolute() == save_to.absolute():
        raise ConfigError(f"--learn-out {learn_out}: is --save-to's folder; give each model a folder of its own")
    if log_level.lower() not in ("critical", "error", "warning", "info"):
        raise ConfigError(f"--log-level must be critical, error, warning or info, got {log_level!r}")
    read = dict(format=format, text1=text1, text2=text2)
    session, columns = _session(
        model_dir, data, column, pairs, read, out, save_to, k, target_precision, seed, device, reuse
    )
    session.source, session.from_pairs = str(source), pairs is not None
    from ..label.learning import Learner

    session.learner = Learner(session, Learner.origin(session.model), learn_out)
    if oracle_column is not None:
        _replay(session, columns, oracle_column, budget, pairs is not None, source, as_json)
        return
    from ..label.web import create_app
    from ..serve import run
    from ..serve.security import local_names

    run(
        create_app(session, host_names=local_names(host)),
        host=host,
        port=port,
        log_level=log_level.lower(),
        what=f"labelling {source} into {out}",
        note="open it in a browser",
    )


def _session(model_dir, data, column, pairs, read, out, save_to, k, target_precision, seed, device, reuse=None):
    from ..label.session import LabelSession, corpus, given_pairs
    from ..label.store import LabelStore
    from ..models.loading import load_model

    if data is not None:  # a --data whose text column cannot be told is refused before the labels file is made
        from ..data.pairs import text_rows

        rows = text_rows(data, column)
        next(rows, None)
        rows.close()
    store = LabelStore(out)  # a bad labels file is refused before the (slow) encoding
    model = load_model(model_dir, device=device)
    if data is not None:
        from ..search.reuse import open_reuse

        candidates, columns = corpus(model, data, column, k=k, progress=True, reuse=open_reuse(reuse, model))
    else:
        candidates, columns = given_pairs(model, pairs, **read)
    session = LabelSession(model, candidates, store, save_to=save_to, target_precision=target_precision, seed=seed)
    return session, columns


def _replay(session, columns, column, budget, is_pairs, source, as_json) -> None:
    from ..label.session import oracle, replay

    label = oracle(session.c, columns, column, pairs=is_pairs, source=str(source))
    stats = replay(session, label, budget, progress=True)
    t = stats["threshold"]
    lines = [f"{stats['answers']} answers ({stats['duplicates']} duplicates) in {session.store.path}"]
    if t is None:
        lines.append("threshold: needs a duplicate and a non-duplicate")
    else:
        lines.append(
            f"threshold {t:.4f}: estimated precision {_share(stats['precision'])}, recall {_share(stats['recall'])}, "
            f"flags {stats['flags']} of {stats['candidates']} pairs (the model's {stats['model_threshold']:.4f} flags "
            f"{stats['model_flags']})"
        )
    emit({"labels": str(session.store.path), **stats}, as_json, lines)


def _share(value) -> str:
    return "unknown" if value is None else f"{value:.3f}"
