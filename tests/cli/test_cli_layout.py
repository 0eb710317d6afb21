"""The layout of siamese/cli/: one module per command family, every command registered, no import cycle."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import typer

import siamese
from siamese.cli import app

PACKAGE = Path(siamese.__file__).parent
FAMILIES = ("train", "models", "evaluate", "corpus", "serve", "label", "data")


def _module_imports(path: Path, name: str) -> set[str]:
    """The siamese modules ``name`` (at ``path``) imports at module level (not inside functions)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("siamese")}
        elif isinstance(node, ast.ImportFrom):
            base = (
                importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                if node.level
                else node.module
            )
            if base.startswith("siamese"):
                # `from . import corpus` imports the submodule siamese.cli.corpus
                found |= {
                    f"{base}.{a.name}"
                    for a in node.names
                    if (PACKAGE.parent / f"{base}.{a.name}".replace(".", "/")).with_suffix(".py").exists()
                }
                found.add(base)
    return found


def _graph() -> dict[str, set[str]]:
    files = {f"siamese.cli.{p.stem}": p for p in (PACKAGE / "cli").glob("*.py") if p.stem != "__init__"}
    files["siamese.cli"] = PACKAGE / "cli" / "__init__.py"
    return {name: _module_imports(path, name) & set(files) for name, path in files.items()}


def test_the_cli_modules_import_each_other_without_a_cycle():
    graph = _graph()
    state: dict[str, str] = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != "open", f"import cycle: {' -> '.join(path + [nxt])}"
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # the command modules and the emoji commands share siamese.cli.common, never the app
    for name in [*(f"siamese.cli.{f}" for f in FAMILIES), "siamese.cli.emoji", "siamese.cli.common"]:
        assert "siamese.cli.root" not in graph[name] and "siamese.cli" not in graph[name], (name, graph[name])
    assert graph["siamese.cli"] == set()  # the package's app is loaded lazily


def test_every_command_of_the_family_modules_is_registered():
    registered = {c.callback for c in app.registered_commands}
    for group in app.registered_groups:
        registered |= {c.callback for c in group.typer_instance.registered_commands}
    defined = set()
    for family in FAMILIES:
        module = importlib.import_module(f"siamese.cli.{family}")
        # a command is a public function wrapped by user_errors (or formats, which cannot fail)
        defined |= {
            fn
            for name, fn in vars(module).items()
            if callable(fn)
            and not isinstance(fn, type)  # a class (the options of train) is not a command
            and not name.startswith("_")
            and getattr(fn, "__module__", None) == module.__name__
        }
    assert defined and defined <= registered, sorted(f.__name__ for f in defined - registered)


def test_the_command_tree():
    group = typer.main.get_command(app)
    assert list(group.commands) == [
        "train",
        "evaluate",
        "predict",
        "calibrate",
        "score",
        "pretrained",
        "encode",
        "summary",
        "rank",
        "evaluate-answers",
        "search",
        "dedupe",
        "serve",
        "label",
        "distill",
        "export",
        "formats",
        "index",
        "emoji",
    ]
    assert list(group.commands["index"].commands) == ["build", "add"]
    assert list(group.commands["emoji"].commands) == ["train-vae", "encode", "generate", "train", "evaluate", "suggest"]
