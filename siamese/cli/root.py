"""The ``siamese`` Typer app: every command, registered here in the order ``siamese --help`` lists them.

The commands live in one module per family (training, evaluation, corpus, serving; the emoji
sub-app in emoji.py); none of them imports this module, so there is no cycle. Each
command imports what it needs when it runs: loading the app costs Typer and nothing heavy."""

from __future__ import annotations

import os
import sys

# OpenMP threads that spin while they wait for each other burn the cores they wait for when other
# processes share them: MiniLM encoding on 2 threads of a loaded 2-core machine took 4-6x longer
# (and 5x the CPU time) than with waiting threads asleep. Read once, when torch loads: before
# any command imports it; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import typer  # noqa: E402

from . import corpus, evaluation, labeling, serving, training  # noqa: E402
from .declared import DeclaredCommand  # noqa: E402
from .emoji import emoji_app  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Siamese neural networks for semantic similarity.")

app.command(cls=DeclaredCommand)(training.train)  # generated from the declared options
app.command()(evaluation.evaluate)
app.command()(evaluation.predict)
app.command()(evaluation.calibrate)
app.command()(evaluation.score)
app.command("pretrained")(training.pretrained_model)
app.command()(corpus.encode)
app.command()(evaluation.summary)
app.command()(evaluation.rank)
app.command("evaluate-answers")(evaluation.evaluate_answers)
app.command()(corpus.search)
app.command()(corpus.dedupe)
app.command()(serving.serve)
app.command()(labeling.label)
app.command("distill")(training.distill_command)
app.command()(training.export)
app.command()(serving.formats)

index_app = typer.Typer(no_args_is_help=True, help="Build and extend duplicate-search indexes.")
index_app.command("build")(corpus.index_build)
index_app.command("add")(corpus.index_add)
app.add_typer(index_app, name="index")

app.add_typer(emoji_app, name="emoji")  # `siamese emoji ...`


def main() -> None:  # pragma: no cover - console entry point
    sys.exit(app())
