"""Options declared once: a configuration field carries its command-line flag, help, bounds and
the registry its names come from, and ``siamese train`` is generated from these declarations
(siamese/cli/declared.py), so a new option is one field in one place.

Imports nothing heavy: the command line reads the declarations when it starts."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any


class _NotSet:
    def __repr__(self) -> str:
        return "NOT_SET"


NOT_SET = _NotSet()  # an Option's cli_default when the command line's default is the field's


@dataclass(frozen=True)
class Option:
    """How a configuration field appears on the command line."""

    help: str = ""
    flags: tuple[str, ...] = ()  # default: --field-name; a bool may give "--on/--off"
    min: float | None = None
    max: float | None = None
    # "module:NAME", read only when help is shown: a registry (dict) whose names end the help, or
    # a function giving the help's end (e.g. each loss's default margin)
    names: str | None = None
    cli_type: Any = None  # the command line's type where the field's own differs (a Path for a str field)
    cli_default: Any = NOT_SET  # the command line's default where it differs (None: decided by other options)
    parse: Callable[[Any], Any] | None = None  # command-line value -> field value

    def names_help(self) -> str:
        """The help with the registry's names (imports the registry: call only to show help)."""
        if self.names is None:
            return self.help
        module, _, attribute = self.names.partition(":")
        found = getattr(importlib.import_module(module), attribute)
        return f"{self.help} {found()}" if callable(found) else f"{self.help} One of: {', '.join(found)}."


def option(default: Any = MISSING, help: str = "", *, default_factory: Any = MISSING, **how: Any) -> Any:
    """A dataclass field declared as a command-line option (``how``: the :class:`Option` fields)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"option": Option(help, **how)})


@dataclass(frozen=True)
class Declared:
    """One declared option: its name (the keyword of the generated command), field and declaration."""

    name: str
    owner: type
    field: dataclasses.Field[Any]
    option: Option

    @property
    def default(self) -> Any:
        """The command line's default: the declared one, else the field's."""
        if self.option.cli_default is not NOT_SET:
            return self.option.cli_default
        if self.field.default is not MISSING:
            return self.field.default
        return self.field.default_factory()  # type: ignore[operator]  # one of the two is set

    @property
    def type(self) -> Any:
        """The command line's type: the declared one, else the field's annotation."""
        if self.option.cli_type is not None:
            return self.option.cli_type
        hint = self.field.type
        if isinstance(hint, str):  # postponed annotations: evaluated in the declaring module
            hint = eval(hint, vars(sys.modules[self.owner.__module__]))  # noqa: S307 (our own source)
        return hint


def _nested(f: dataclasses.Field[Any]) -> type | None:
    """The dataclass a field holds when its options are declared inside it (e.g. the loss options)."""
    factory = f.default_factory
    return factory if isinstance(factory, type) and dataclasses.is_dataclass(factory) else None


def declared_options(*configs: type) -> Iterator[Declared]:
    """Every declared option of ``configs`` (nested configuration dataclasses included), in order."""
    for config in configs:
        for f in dataclasses.fields(config):
            inner = _nested(f)
            if inner is not None:
                yield from declared_options(inner)
            elif "option" in f.metadata:
                yield Declared(f.name, config, f, f.metadata["option"])


def from_options(config: type, values: dict[str, Any]) -> Any:
    """A ``config`` built from option values by field name: a declared option's value parsed; one
    left unset on the command line (None where its command-line default is None) keeps the field's
    default; nested configurations are built the same way; other fields are taken from ``values``
    when present."""
    kwargs = {}
    for f in dataclasses.fields(config):
        inner = _nested(f)
        if inner is not None:
            kwargs[f.name] = from_options(inner, values)
            continue
        if f.name not in values:
            continue
        value, declared = values[f.name], f.metadata.get("option")
        if declared is not None:
            if value is None and declared.cli_default is None:
                continue
            if value is not None and declared.parse is not None:
                value = declared.parse(value)
        kwargs[f.name] = value
    return config(**kwargs)


def check_bounds(config: Any, error: type[Exception]) -> None:
    """Refuse a declared option's value outside its bounds (the same bounds the command line has)."""
    for d in declared_options(type(config)):
        value = getattr(config, d.name, None)
        if d.owner is not type(config):
            continue  # a nested configuration checks its own
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if (d.option.min is not None and value < d.option.min) or (d.option.max is not None and value > d.option.max):
            if d.option.min is not None and d.option.max is not None:
                bounds = f"in [{d.option.min:g}, {d.option.max:g}]"
            else:
                bounds = f">= {d.option.min:g}" if d.option.min is not None else f"<= {d.option.max:g}"
            raise error(f"{d.name} must be {bounds}, got {value!r}")


def is_path(hint: Any) -> bool:
    """Whether an option's type holds paths (Path, Optional[Path], list[Path])."""
    if hint is Path:
        return True
    return any(is_path(arg) for arg in typing.get_args(hint))
