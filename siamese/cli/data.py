"""``siamese formats``: the pair file formats the commands read."""

from __future__ import annotations

import typer


def formats():
    """List the pair formats the readers understand."""
    from ..data.pairs import FORMATS

    for fmt in FORMATS.values():
        typer.echo(f"{fmt.name:<12} {fmt.description}")
