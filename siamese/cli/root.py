"""The ``siamese`` Typer app: every command, registered here in the order ``siamese --help`` lists them.

The commands live in one module per family (training, evaluation, corpus, serving; the emoji
sub-app in emoji.py); none of them imports this module, so there is no cycle. Each
command imports what it needs when it runs: loading the app costs Typer and nothing heavy."""

from __future__ import annotations

import sys

import typer

from . import corpus, data, evaluate, label, models, serve, train
from .declared import DeclaredCommand
from .emoji import emoji_app

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Siamese neural networks for semantic similarity.")

app.command(cls=DeclaredCommand)(train.train)  # generated from the declared options
app.command()(evaluate.evaluate)
app.command()(evaluate.predict)
app.command()(evaluate.calibrate)
app.command()(evaluate.score)
app.command("pretrained")(models.pretrained_model)
app.command()(corpus.encode)
app.command()(models.summary)
app.command()(evaluate.rank)
app.command("evaluate-answers")(evaluate.evaluate_answers)
app.command()(corpus.search)
app.command()(corpus.dedupe)
app.command()(serve.serve)
app.command()(label.label)
app.command("distill", cls=DeclaredCommand)(train.distill_command)
app.command()(models.export)
app.command()(data.formats)

index_app = typer.Typer(no_args_is_help=True, help="Build and extend duplicate-search indexes.")
index_app.command("build")(corpus.index_build)
index_app.command("add")(corpus.index_add)
app.add_typer(index_app, name="index")

app.add_typer(emoji_app, name="emoji")  # `siamese emoji ...`


def main() -> None:  # pragma: no cover - console entry point
    sys.exit(app())
