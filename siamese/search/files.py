"""Dedupe runs and indexes from files to folders, as ``siamese dedupe`` and ``siamese index`` make them:
:func:`dedupe_files` reads the texts (and a reference set or index), loads the model (and a cross-encoder to
verify with), runs :func:`siamese.search.run.dedupe` or :func:`~siamese.search.run.dedupe_against` and reports;
:func:`rethreshold_files` regroups a finished run without encoding; :func:`index_files` builds an index folder
and :func:`add_files` extends one, taking vectors a run or index already holds (``reuse``); :func:`encode_files`
writes a file's vectors to a ``.npy``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io.report import RunReport


def corpus_engine(engine: str, address: str | None, device: str, progress: bool) -> Any:
    """None (this process) or the Ray engine (``engine="ray"``); Ray is imported only then."""
    from .ray_engine import check_engine

    if check_engine(engine) == "local":
        if address is not None:
            raise ConfigError("--address is the Ray cluster to join: give it with --engine ray")
        return None
    from .ray_engine import RayEngine

    return RayEngine(address, device=device, progress=progress)


def dedupe_files(
    model_dir: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    against: str | os.PathLike | None = None,
    verify: str | os.PathLike | None = None,
    verify_band: float | str | None = "auto",
    threshold: float | None = None,
    floor: float | None = None,
    column: str | None = None,
    id_column: str | None = None,
    against_column: str | None = None,
    against_id_column: str | None = None,
    k: int = 20,
    kind: str = "auto",
    clustering: str | None = None,
    min_size: int | None = None,
    explain: int = 0,
    reuse: str | os.PathLike | None = None,
    device: str = "auto",
    engine: str = "local",
    address: str | None = None,
    progress: bool = True,
) -> RunReport:
    """Group the near-duplicate texts of ``data`` (or, with ``against``, a reference file or index
    folder, flag the texts that duplicate it) with the model of ``model_dir`` into the run folder
    ``out``. ``verify``: a stronger model folder (a cosine bi-encoder or a cross-encoder)
    deciding the candidate pairs within ``verify_band`` of the threshold (None: every candidate;
    "auto": a bi-encoder's band chosen on a sample, a cross-encoder's 0.1). A static student's
    folder is read without torch unless the Ray engine or an index folder needs the full model.
    ``explain``: also report this many of the least similar pairs accepted. ``reuse``: a dedupe
    run or index folder of the same model whose vectors are taken instead of encoding the texts
    it holds (an earlier run at ``out`` is reused without it). The report's ``value`` is the
    :class:`~siamese.search.run.DedupeRun`."""
    from ..data.records import read_records, skipped_line, unused_id_column
    from ..io.atomic import check_not_input, check_target
    from ..models.loading import load_verifier
    from ..models.static_reader import open_static
    from .pairs import DEFAULT_CLUSTERING
    from .reuse import earlier_output, open_reuse
    from .run import dedupe, dedupe_against

    out = Path(out)
    check_not_input(out, [p for p in (model_dir, data, against, verify) if p is not None])  # never over its inputs
    check_target(out, kind="dedupe run", can_overwrite=False)  # a dedupe run replaces its own folder unasked
    extra = {}
    if verify is not None:
        if against is not None:
            raise ConfigError("--verify works on a dedupe within one corpus, not with --against")
        extra = {"verify": load_verifier(verify, device=device), "verify_band": verify_band}
    options = dict(threshold=threshold, floor=floor, k=k, kind=kind, progress=progress)
    options["engine"] = corpus_engine(engine, address, device, progress)
    skipped: list[int] = []
    records = read_records(data, column, id_column, skipped=skipped)
    sources = {"data": str(data), "column": column, "id_column": id_column}
    # A static student encodes without torch (less memory and start-up); Ray and an index folder take the full model.
    light = options["engine"] is None and not (against is not None and Path(against).is_dir())
    model = open_static(model_dir, device) if light else None
    if model is None:
        from ..models.siamese import SiameseModel

        model = SiameseModel.load(model_dir, device=device)
    options["reuse"] = open_reuse(reuse, model) if reuse is not None else earlier_output(out, model)
    if against is None:
        run = dedupe(
            model,
            records,
            out,
            clustering=clustering or DEFAULT_CLUSTERING,
            min_size=min_size or 2,
            sources=sources,
            **extra,
            **options,
        )
    else:
        reference = _reference(Path(against), model, against_column or column, against_id_column, id_column)
        run = dedupe_against(model, records, reference, out, sources={**sources, "against": str(against)}, **options)
    summary = run.summary()
    if "reused" in run.meta:
        summary["reused"] = run.meta["reused"]
    report = _report(run, summary, explain)
    if (line := skipped_line(data, skipped)) is not None:
        report.lines.append(line)
    if id_column is None and (named := unused_id_column(records)) is not None:
        # a join back to the file needs its own ids; they were not taken unasked (they may repeat)
        report.lines.append(f"ids are row numbers from 1; --id-column {named} gives the file's own {named!r} values")
    return report


def _reference(against: Path, model, column: str | None, against_id_column: str | None, id_column: str | None):
    """The reference set: an index folder (opened with the model) or a file of texts."""
    from ..data.records import read_records

    if against.is_dir():
        from .index import DuplicateIndex

        return DuplicateIndex.load(against, model)
    return read_records(against, column, against_id_column if against_id_column is not None else id_column)


def rethreshold_files(
    run_dir: str | os.PathLike,
    threshold: float,
    *,
    clustering: str | None = None,
    min_size: int | None = None,
    explain: int = 0,
) -> RunReport:
    """Regroup the run folder ``run_dir`` at ``threshold`` (at or above its floor), in place,
    without encoding; ``clustering`` and ``min_size`` default to the run's."""
    from .run import DedupeRun

    run = DedupeRun.load(run_dir)
    summary = run.rethreshold(threshold, clustering=clustering, min_size=min_size)
    return _report(run, summary, explain)


def _report(run, summary: dict, explain: int) -> RunReport:
    """The run's summary (and the ``explain`` least similar accepted pairs) as JSON and lines."""
    if "verified" in run.meta:
        summary["verified"] = run.meta["verified"]
    least = run.least_similar(explain) if explain else []
    if explain:
        summary["least_similar"] = [a.as_json() for a in least]
    if summary["mode"] == "self":
        lines = [
            f"{summary['pairs']} duplicate pairs in {summary['clusters']} clusters ({summary['clustered_texts']} "
            f"of {summary['texts']} texts, {summary['exact_duplicates']} exact copies) at {summary['threshold']:.3f}; "
            f"written to {summary['out']}"
        ]
    else:
        lines = [
            f"{summary['flagged']} of {summary['texts']} texts duplicate the reference ({summary['exact_matches']} "
            f"exactly) at {summary['threshold']:.3f}; written to {summary['out']}"
        ]
    if summary.get("reused", {}).get("vectors"):
        lines.append(
            f"{summary['reused']['vectors']} vectors taken from {summary['reused']['from']} instead of encoded again"
        )
    lines += [f"{a.similarity:.3f} [{a.first.id}] {a.first.text} ~ [{a.second.id}] {a.second.text}" for a in least]
    return RunReport(summary, lines, run)


def encode_files(
    model_dir: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    column: str | None = None,
    batch_size: int | None = None,
    device: str = "auto",
    engine: str = "local",
    address: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> RunReport:
    """Encode every text of ``data`` (a .txt file, one per line, an empty line an error; or a CSV/TSV's ``column``)
    with the model of ``model_dir`` into the float32 ``.npy`` file ``out``, row i for text i (``engine="ray"``: on a
    Ray cluster, ``address`` or a local one). As ``siamese encode`` does."""
    from ..data.pairs import read_texts
    from ..io.atomic import check_file_target
    from ..models.siamese import SiameseModel
    from .vectors import check_npy_name, check_vectors_file, encode_to_file

    out = check_npy_name(check_file_target(check_vectors_file(out), overwrite=overwrite, inputs=[data, model_dir]))
    model = SiameseModel.load(model_dir, device=device)
    texts = read_texts(data, column, skip_empty=False)  # row i of the output is text i: no silent skips
    runner = corpus_engine(engine, address, device, progress)
    result = encode_to_file(
        model, texts, out, batch_size=batch_size, progress=progress, engine=runner, overwrite=overwrite
    )
    lines = [
        f"encoded {result['n']} texts into {result['dim']}-d vectors in {result['seconds']:.2f}s "
        f"({result['texts_per_second']} texts/s); written to {out}"
    ]
    if model.config.head != "cosine":
        lines.append(f"note: head {model.config.head!r}: raw encoder features, not unit vectors")
    return RunReport(result, lines)


def index_files(
    model_dir: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    column: str | None = None,
    id_column: str | None = None,
    kind: str = "flat",
    shard_size: int = 1_000_000,
    reuse: str | os.PathLike | None = None,
    device: str = "auto",
    engine: str = "local",
    address: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> RunReport:
    """Encode the texts of ``data`` (a .txt file, or a CSV/TSV's ``column``) with the model of ``model_dir`` into a
    FAISS index folder ``out`` (``kind``: flat, hnsw, ivf or ondisk, whose lists are added ``shard_size`` vectors at a
    time), each distinct text once, its id ``id_column``'s value or else its position. ``reuse``: a dedupe run or
    index folder whose vectors of the same texts are taken instead of encoded again (by default those of the index
    ``out`` replaces, when the same model wrote it). As ``siamese index build`` does."""
    from ..data.records import read_records, skipped_line
    from ..io.atomic import check_not_input, check_target
    from ..models.siamese import SiameseModel
    from .index import DuplicateIndex
    from .reuse import earlier_output, open_reuse

    out = Path(out)
    check_not_input(out, [data, model_dir])
    check_target(out, overwrite=overwrite, kind="index")
    if shard_size < 1:
        raise ConfigError(f"shard_size must be at least 1, got {shard_size}")
    model = SiameseModel.load(model_dir, device=device)
    index = DuplicateIndex(model, kind=kind)
    index.shard_size = shard_size
    skipped: list[int] = []
    records = read_records(data, column, id_column, skipped=skipped)
    texts, ids = [r.text for r in records], [r.id for r in records] if id_column else None
    known = open_reuse(reuse, model) if reuse is not None else earlier_output(out, model)
    runner = corpus_engine(engine, address, device, progress)
    try:
        index.add(texts, ids, progress=progress, engine=runner, reuse=known)
        index.save(out, overwrite=overwrite)
    finally:
        index.close()  # an on-disk build's scratch vectors, also when the save failed or a signal came
    result = {"out": str(out), "size": len(index), "skipped": len(texts) - len(index), "kind": kind}
    result.update(_reused(known))
    lines = [f"indexed {len(index)} texts ({kind}) into {out}; {len(texts) - len(index)} repeats skipped"]
    lines += [line] if (line := skipped_line(data, skipped)) is not None else []
    return RunReport(result, lines + _reused_line(known), index)


def add_files(
    index_dir: str | os.PathLike,
    data: str | os.PathLike,
    *,
    model_dir: str | os.PathLike | None = None,
    column: str | None = None,
    id_column: str | None = None,
    allow_duplicates: bool = False,
    reuse: str | os.PathLike | None = None,
    device: str = "auto",
    progress: bool = True,
) -> RunReport:
    """Append the texts of ``data`` to the index folder ``index_dir`` (rewritten atomically, under its lock),
    encoding only texts it does not hold yet (all with ``allow_duplicates``), with its own model unless
    ``model_dir`` names one; each text's id ``id_column``'s value (none may be in the index already) or else its
    position. ``reuse``: a run or index folder whose vectors are taken. As ``siamese index add``."""
    from ..data.records import read_records, skipped_line
    from ..io.atomic import check_not_input
    from ..models.siamese import SiameseModel
    from .index import add_to_index
    from .reuse import KnownVectors

    check_not_input(index_dir, [data])  # the folder is rewritten: a file inside it is no input
    skipped: list[int] = []
    records = read_records(data, column, id_column, skipped=skipped)
    texts, ids = [r.text for r in records], [r.id for r in records] if id_column else None
    model = SiameseModel.load(model_dir, device=device) if model_dir else None
    opened: list = []

    def known(index_model):  # opened once the index (and so its model) is loaded
        opened.append(KnownVectors.open(reuse, index_model))
        return opened[0]

    index, added = add_to_index(
        index_dir,
        texts,
        model,
        ids=ids,
        allow_duplicates=allow_duplicates,
        progress=progress,
        device=device,
        reuse=known if reuse is not None else None,
    )
    used = opened[0] if opened else None
    result = {"out": str(index_dir), "added": added, "skipped": len(texts) - added, "size": len(index)}
    result.update(_reused(used))
    lines = [f"added {added} texts ({len(texts) - added} already indexed, skipped); {index_dir} now holds {len(index)}"]
    lines += [line] if (line := skipped_line(data, skipped)) is not None else []
    before = len(index) - added
    if id_column is None and added and index.ids[:before] != [str(i) for i in range(before)]:
        lines.append("the new texts' ids are their positions; the index's other ids are not: --id-column names yours")
    return RunReport(result, lines + _reused_line(used), index)


def _reused(known) -> dict:
    return {} if known is None else {"reused": known.reused, "reused_from": str(known.source)}


def _reused_line(known) -> list[str]:
    if known is None or not known.reused:
        return []
    return [f"{known.reused} vectors taken from {known.source} instead of encoded again"]
