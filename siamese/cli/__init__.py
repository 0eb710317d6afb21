"""The ``siamese`` command line (the console script ``siamese = siamese.cli:main``: the app, SIGTERM handled).

    common.py      shared options, user_errors (one ``error:`` line, exit 2), check_out_folder, read_pair_file, emit
    root.py        the Typer app: registers every command below and mounts the sub-apps
                   (not app.py: a submodule named app would shadow the `app` attribute)
    train.py       train (also --nproc workers, --resume, --cross), distill
    models.py      pretrained, export, summary
    evaluate.py    evaluate, predict, calibrate, score, rank, evaluate-answers
    corpus.py      encode, index build / index add, search, dedupe
    serve.py       serve
    data.py        formats
    emoji.py       the ``siamese emoji ...`` sub-app (the emoji package's commands)
    label.py       label (the labelling loop's local page, or an --oracle-column replay)
    declared.py    commands generated from declared options (train)

Importing this package costs nothing: ``app`` and ``main`` are loaded on first use (PEP 562), so
``from siamese.cli.common import ...`` does not pull in every command."""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "app": ".root",
        "main": ".root",
        "index_app": ".root",
        "emoji_app": ".emoji",
    },
)
