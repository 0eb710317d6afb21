"""Typer commands generated from declared options (siamese.config.options): each configuration field
declared with ``option(...)`` becomes one command-line option, with its flag, default, help and
bounds from the declaration, so no default or help is written twice."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Annotated

import typer
from typer.core import TyperCommand

from ..config.options import Declared, declared_options


def _parameter(d: Declared) -> inspect.Parameter:
    """The Typer parameter of one declared option."""
    hint = d.type
    if typing.get_origin(hint) is Annotated:  # a shared option of the command line (e.g. --format)
        return inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=d.default, annotation=hint)
    flags = d.option.flags or (f"--{d.name.replace('_', '-')}",)
    bounds = {k: v for k, v in (("min", d.option.min), ("max", d.option.max)) if v is not None}
    info = typer.Option(*flags, help=d.option.help, **bounds)
    return inspect.Parameter(
        d.name, inspect.Parameter.KEYWORD_ONLY, default=d.default, annotation=Annotated[hint, info]
    )


def declared_command(run: Callable[[dict], None], *configs: type, doc: str) -> Callable[..., None]:
    """A command taking every declared option of ``configs`` as keywords and calling ``run`` with
    them as one dict. Register it with ``cls=DeclaredCommand`` so help lists registry names."""
    declared = list(declared_options(*configs))
    parameters = [_parameter(d) for d in declared]

    def command(**options) -> None:
        return run(options)

    command.__signature__ = inspect.Signature(parameters)
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = doc
    command.declared = {d.name: d.option for d in declared}  # read by DeclaredCommand for its help
    return command


class DeclaredCommand(TyperCommand):
    """Fills in the registry names of declared options (``Option.names``) when help is shown,
    so the registries (torch and all) are imported only then."""

    def format_help(self, ctx, formatter) -> None:
        declared = getattr(self.callback, "declared", {})
        for param in self.params:
            if param.name in declared and declared[param.name].names:
                param.help = declared[param.name].names_help()
        super().format_help(ctx, formatter)
