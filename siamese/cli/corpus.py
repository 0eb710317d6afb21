"""``siamese encode``, ``index build``, ``index add``, ``search`` and ``dedupe``: commands over a
corpus of texts, on this process or a Ray cluster (``--engine ray``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional, cast

import typer

from ..errors import ConfigError
from .common import (
    AddressOpt,
    DeviceOpt,
    EngineOpt,
    JsonOpt,
    OverwriteFileOpt,
    OverwriteOpt,
    ReuseOpt,
    TextColumnOpt,
    VerifyAllOpt,
    VerifyBandOpt,
    VerifyOpt,
    emit,
    text_argument,
    threshold_option,
    user_errors,
)
from .common import verify_band as verify_band_choice


@user_errors
def encode(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[
        Path,
        typer.Option(
            "--data", help="Texts: a .txt file (one per line; an empty line is an error) or a CSV/TSV column."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Vectors to write: a float32 .npy, one row per text in file order.")
    ],
    column: TextColumnOpt = None,
    batch_size: Annotated[Optional[int], typer.Option(min=1, help="Texts per batch (default: the encoder's).")] = None,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    overwrite: OverwriteFileOpt = False,
    as_json: JsonOpt = False,
):
    """Embed texts into a .npy file: unit vectors for cosine models, the encoder's raw features for the other heads."""
    from ..search.files import encode_files

    report = encode_files(
        model_dir,
        data,
        out,
        column=column,
        batch_size=batch_size,
        device=device,
        engine=engine,
        address=address,
        overwrite=overwrite,
        progress=not (quiet or as_json),
    )
    emit(report.result, as_json, report.lines)


IndexIdColumnOpt = Annotated[
    Optional[str],
    typer.Option("--id-column", help="CSV column of unique ids that search results show (default: the position)."),
]


@user_errors
def index_build(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    data: Annotated[Path, typer.Option("--data", help="Texts: a .txt file (one per line) or a CSV/TSV column.")],
    out: Annotated[Path, typer.Option("--out", help="Index folder to write.")],
    column: TextColumnOpt = None,
    id_column: IndexIdColumnOpt = None,
    kind: Annotated[
        str,
        typer.Option(
            help=(
                "flat (exact), hnsw or ivf (approximate, for large corpora), or ondisk (ivf with its lists on disk, "
                "memory-mapped: a corpus larger than memory)."
            )
        ),
    ] = "flat",
    shard_size: Annotated[
        int,
        typer.Option(min=1, help="--kind ondisk: vectors added to the lists per shard (what is in memory at a time)."),
    ] = 1_000_000,
    reuse: ReuseOpt = None,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Encode a corpus into a FAISS index saved with its texts (each distinct text once)."""
    from ..search.files import index_files

    report = index_files(
        model_dir,
        data,
        out,
        column=column,
        id_column=id_column,
        kind=kind,
        shard_size=shard_size,
        reuse=reuse,
        device=device,
        engine=engine,
        address=address,
        overwrite=overwrite,
        progress=not quiet,
    )
    emit(report.result, as_json, report.lines)


def _open_index(index_dir: Path, model_dir: Path | None, device: str):
    """The index, with the given model folder or else the one recorded when it was built."""
    from ..models.siamese import SiameseModel
    from ..search import DuplicateIndex

    return DuplicateIndex.load(
        index_dir, SiameseModel.load(model_dir, device=device) if model_dir else None, device=device
    )


@user_errors
def index_add(
    index_dir: Annotated[Path, typer.Argument(help="Index folder to extend (rewritten atomically).")],
    data: Annotated[Path, typer.Option("--data", help="New texts: a .txt file or a CSV/TSV column.")],
    model_dir: Annotated[
        Optional[Path], typer.Option("--model", help="Model folder (default: the one that built the index).")
    ] = None,
    column: TextColumnOpt = None,
    id_column: IndexIdColumnOpt = None,
    allow_duplicates: Annotated[
        bool,
        typer.Option(
            "--allow-duplicates", help="Also add texts already indexed (by exact text, whitespace collapsed)."
        ),
    ] = False,
    reuse: ReuseOpt = None,
    device: DeviceOpt = "auto",
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Append texts to an index, encoding only the new ones; texts already indexed are skipped."""
    from ..search.files import add_files

    report = add_files(
        index_dir,
        data,
        model_dir=model_dir,
        column=column,
        id_column=id_column,
        allow_duplicates=allow_duplicates,
        reuse=reuse,
        device=device,
        progress=not quiet,
    )
    emit(report.result, as_json, report.lines)


@user_errors
def search(
    index_dir: Annotated[Path, typer.Argument(help="Index folder.")],
    query: Annotated[str, typer.Argument(help="The new question.")],
    model_dir: Annotated[
        Optional[Path], typer.Option("--model", help="Model folder (default: the one that built the index).")
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="How many neighbours.")] = 5,
    threshold: Annotated[
        Optional[float], typer.Option(callback=threshold_option, help="Duplicate threshold (default: the model's).")
    ] = None,
    rerank: Annotated[
        Optional[Path],
        typer.Option(
            "--rerank",
            help="A cross-encoder folder (train --cross) that re-scores the k candidates and gives the verdict.",
        ),
    ] = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Nearest indexed texts to a query, with similarity and a duplicate verdict."""
    from dataclasses import asdict

    from ..models.loading import load_cross_encoder

    query = text_argument(query, "query")
    # a wrong folder fails before the index is read
    cross = load_cross_encoder(rerank, device=device) if rerank else None
    index = _open_index(index_dir, model_dir, device)
    hits = index.search([query], k, threshold=threshold, rerank=cross)[0]
    emit(
        {"query": query, "hits": [asdict(h) for h in hits]},
        as_json,
        [f"{h.similarity:.4f} {'DUP' if h.duplicate else '   '} [{h.id}] {h.text}" for h in hits],
    )


@user_errors
def dedupe(
    path: Annotated[Path, typer.Argument(help="Model folder; with --rethreshold, a finished run's folder.")],
    data: Annotated[Optional[Path], typer.Option("--data", help="Texts: a .txt file or a CSV/TSV column.")] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", help="Run folder to write (results, candidate pairs, vectors).")
    ] = None,
    against: Annotated[
        Optional[Path],
        typer.Option(
            "--against",
            help="Reference set (a .txt/CSV/TSV file or an index folder): flag the texts that duplicate it.",
        ),
    ] = None,
    rethreshold: Annotated[
        Optional[float],
        typer.Option(
            "--rethreshold",
            help="Regroup the run folder PATH at this threshold (at or above its floor), without encoding.",
            callback=threshold_option,
        ),
    ] = None,
    threshold: Annotated[
        Optional[float],
        typer.Option(
            callback=threshold_option, help="Duplicate threshold (default: the model's, but at least 0.9 cosine)."
        ),
    ] = None,
    floor: Annotated[
        Optional[float],
        typer.Option(
            help="Keep candidate pairs down to this similarity for later --rethreshold (default: threshold - 0.05).",
            callback=threshold_option,
        ),
    ] = None,
    column: TextColumnOpt = None,
    id_column: Annotated[
        Optional[str], typer.Option("--id-column", help="CSV column of unique ids (default: row number).")
    ] = None,
    against_column: Annotated[
        Optional[str], typer.Option(help="Text column of a CSV reference (default: --column).")
    ] = None,
    against_id_column: Annotated[
        Optional[str], typer.Option(help="Id column of a CSV reference (default: --id-column).")
    ] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Neighbours examined per text.")] = 20,
    kind: Annotated[
        str, typer.Option(help="auto (exact up to 50,000 texts, ivf beyond), flat (exact), ivf or hnsw (approximate).")
    ] = "auto",
    clusters: Annotated[
        Optional[str],
        typer.Option(
            help="greedy (the default: in input order, each text joins the earlier kept text it duplicates, or is "
            "kept; no chains), components (all texts linked by a chain of duplicates) or communities (each member "
            "a duplicate of its cluster's most connected centre)."
        ),
    ] = None,
    min_size: Annotated[Optional[int], typer.Option(min=2, help="Smallest cluster written (default 2).")] = None,
    verify: VerifyOpt = None,
    verify_band: VerifyBandOpt = None,
    verify_all: VerifyAllOpt = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Also show the least similar pairs accepted as duplicates.")
    ] = False,
    explain_count: Annotated[int, typer.Option(min=1, help="How many pairs --explain shows.")] = 10,
    reuse: ReuseOpt = None,
    device: DeviceOpt = "auto",
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    as_json: JsonOpt = False,
):
    """Group near-duplicate texts (or, with --against, flag the texts that duplicate a reference set);
    the run folder can be re-thresholded later without encoding."""
    from ..search.files import dedupe_files, rethreshold_files

    shown = explain_count if explain else 0
    band = cast(float | str | None, verify_band_choice(verify, verify_band, verify_all, sample=True, labels=False))
    if rethreshold is not None:
        given = [
            name
            for name, value in (
                ("--data", data),
                ("--out", out),
                ("--against", against),
                ("--verify", verify),
                ("--reuse", reuse),
            )
            if value is not None
        ]
        if given:
            raise ConfigError(f"--rethreshold regroups the run folder in place; it takes no {', '.join(given)}")
        report = rethreshold_files(path, rethreshold, clustering=clusters, min_size=min_size, explain=shown)
    elif data is None or out is None:
        raise ConfigError("dedupe needs --data and --out (or --rethreshold T RUN_FOLDER)")
    else:
        report = dedupe_files(
            path,
            data,
            out,
            against=against,
            verify=verify,
            verify_band=band,
            threshold=threshold,
            floor=floor,
            column=column,
            id_column=id_column,
            against_column=against_column,
            against_id_column=against_id_column,
            k=k,
            kind=kind,
            clustering=clusters,
            min_size=min_size,
            explain=shown,
            reuse=reuse,
            device=device,
            engine=engine,
            address=address,
            progress=not quiet,
        )
    emit(report.result, as_json, report.lines)
