"""A labelling session from files, as ``siamese label`` opens it: :func:`open_session` checks the paths, reads the
corpus (its nearest pairs) or a pair file, loads the model and attaches the learner; :func:`replay_run` answers from
a column of the data (an oracle) instead of a person. The command only adds the page's server."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..io.report import RunReport


def open_session(
    model_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    data: str | os.PathLike | None = None,
    column: str | None = None,
    pairs: str | os.PathLike | None = None,
    save_to: str | os.PathLike | None = None,
    learn_out: str | os.PathLike | None = None,
    k: int = 10,
    target_precision: float = 0.9,
    seed: int = 0,
    reuse: str | os.PathLike | None = None,
    format: str = "auto",
    text1: str | None = None,
    text2: str | None = None,
    device: str = "auto",
    oracle_column: str | None = None,
    progress: bool = True,
):
    """``(session, columns)``: a :class:`~siamese.label.session.LabelSession` over ``data``'s nearest pairs (``k``
    neighbours per text; ``column`` of a CSV) or ``pairs``' pairs, its answers appended to the labels file ``out``
    (resumed when it exists), the page's Save writing to ``save_to`` (default: OUT's name + ``-model``) and its Learn
    to ``learn_out`` (+ ``-learned``); ``columns``: each candidate text's other columns, for :func:`replay_run`.
    Nothing is written until an answer is given; a bad path is refused first, and with ``oracle_column`` (a replay
    of ``pairs``' own labels) a bad label before the pairs are encoded."""
    from ..io.atomic import check_not_input, check_target
    from .learning import Learner

    out = Path(out)
    if (data is None) == (pairs is None):
        raise ConfigError("give --data CORPUS (label its nearest pairs) or --pairs FILE, not both")
    if reuse is not None and data is None:
        raise ConfigError("--reuse takes the vectors of --data's texts; --pairs files are encoded as they are")
    source = Path(data) if data is not None else Path(pairs)  # type: ignore[arg-type]  # one of the two, checked
    save_to = Path(save_to) if save_to is not None else out.with_name(out.stem + "-model")
    learn_out = Path(learn_out) if learn_out is not None else out.with_name(out.stem + "-learned")
    for path in (out, save_to, learn_out):
        check_not_input(path, [source, model_dir])
    for name, folder in (("--save-to", save_to), ("--learn-out", learn_out)):
        if folder.absolute() == out.absolute() or (folder.exists() and out.exists() and folder.samefile(out)):
            raise ConfigError(f"{name} {folder}: is the labels file (--out); the model needs a folder of its own")
        check_target(folder, kind="model")
    if learn_out.absolute() == save_to.absolute():
        raise ConfigError(f"--learn-out {learn_out}: is --save-to's folder; give each model a folder of its own")
    session, columns = _session(
        model_dir, data, column, pairs, dict(format=format, text1=text1, text2=text2), out, save_to, k,
        target_precision, seed, device, reuse, progress, oracle_column,
    )  # fmt: skip
    session.source, session.from_pairs = str(source), pairs is not None
    session.learner = Learner(session, Learner.origin(session.model), learn_out)
    return session, columns


def _session(
    model_dir, data, column, pairs, read, out, save_to, k, target_precision, seed, device, reuse, progress, oracle
):  # fmt: skip
    from ..models.loading import load_model
    from .session import LabelSession, check_oracle_labels, corpus, given_pairs, read_given_pairs
    from .store import LabelStore

    if data is not None:  # a --data whose text column cannot be told is refused before the labels file is made
        from ..data.pairs import text_rows

        rows = text_rows(data, column)
        next(rows, None)
        rows.close()
    given = read_given_pairs(pairs, **read) if pairs is not None else None
    if given is not None and oracle is not None:
        check_oracle_labels(given, oracle, str(pairs))  # a bad answer is refused before the (slow) encoding
    store = LabelStore(out)  # a bad labels file is refused before the (slow) encoding
    model = load_model(model_dir, device=device)
    if data is not None:
        from ..search.reuse import open_reuse

        candidates, columns = corpus(model, data, column, k=k, progress=progress, reuse=open_reuse(reuse, model))
    else:
        candidates, columns = given_pairs(model, pairs, read=given)
    session = LabelSession(model, candidates, store, save_to=save_to, target_precision=target_precision, seed=seed)
    return session, columns


def replay_run(session, columns: list[dict], column: str, budget: int, *, progress: bool = True) -> RunReport:
    """Answer ``session``'s pairs from ``column`` of its data (a pair file's 0/1 label, or for a corpus whether two
    texts share its value) until the labels file holds ``budget`` answers; what the threshold now does."""
    from .session import oracle, replay

    label = oracle(session.c, columns, column, pairs=session.from_pairs, source=session.source)
    stats = replay(session, label, budget, progress=progress)
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
    return RunReport({"labels": str(session.store.path), **stats}, lines, session)


def _share(value) -> str:
    return "unknown" if value is None else f"{value:.3f}"
