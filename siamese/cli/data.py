"""``siamese formats``: the pair file formats the commands read."""

from __future__ import annotations

import typer


def formats():
    """List the pair formats the readers understand."""
    from ..data.pairs import FORMATS

    for fmt in FORMATS.values():
        typer.echo(f"{fmt.name:<12} {fmt.description}")
    typer.echo(
        f"{'(auto)':<12} also a header naming the texts text_a/text_b, sentence_1/sentence_2, question1/question2, "
        "... (any case, separator) with a label, is_duplicate or paraphrase column"
    )
