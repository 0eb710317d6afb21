"""The reference pages, generated from the code so they never drift from it:

- ``cli.md``: every ``siamese`` command, walked from the Typer app (usage, arguments, options with
  their defaults and help). Loading the app imports Typer and the command modules, not torch.
- ``api.md``: the public names of ``siamese/__init__.py`` (read statically with ``ast``), each
  rendered by mkdocstrings from its docstrings (griffe reads the source: nothing is imported).
- ``examples.md``: the source of every ``examples/*.py``, each under its own heading.

They are committed under docs/ (so the guides' links work on GitHub too) and generated again at
every ``mkdocs build`` by the mkdocs-gen-files plugin (so the site is never stale);
``python docs/gen_pages.py`` (from the repository's root) rewrites the committed copies, and
tests/test_docs.py checks that they are current.
"""

from __future__ import annotations

import ast
import html
import re
import sys
from collections import defaultdict
from pathlib import Path

import typer.main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package from the source tree, installed or not (make docs installs it not)

# Typer ships its own copy of click: commands, parameters and contexts are matched by what they
# do (list_commands, param_type_name), and contexts made with the command's own context_class.


def _cell(text: object) -> str:
    """A markdown table cell: one line, pipes and angle brackets escaped."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _default(param, ctx) -> str:
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return "off" if not param.default else "on"
    try:
        value = param.get_default(ctx, call=False)
    except Exception:  # a default that needs the environment: shown as not given
        return ""
    if callable(value) or value is None or value == () or type(value).__name__ in {"Sentinel", "_Sentinel"}:
        return ""
    if isinstance(value, bool) and getattr(param, "secondary_opts", None):
        return param.opts[0] if value else param.secondary_opts[0]
    return f"`{value}`"


def _param_rows(command, ctx) -> list[str]:
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        if param.param_type_name == "argument":
            name = f"`{param.metavar or param.name.upper()}`"
            kind = "argument" + ("" if param.required else ", optional")
        else:
            name = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
            kind = "required" if param.required else ""
        help_text = (getattr(param, "help", None) or "").replace("\\[", "[")  # rich markup escapes
        rows.append(f"| {name} | {kind} | {_default(param, ctx)} | {_cell(help_text)} |")
    return rows


def _command_doc(command, ctx, level: int) -> list[str]:
    path = ctx.command_path
    lines = [f"{'#' * level} `{path}`", ""]
    if command.help:
        lines += [html.escape(command.help.replace("\b\n", "").strip(), quote=False), ""]
    # Typer shows an argument in the usage line as {name}: written as NAME, as in the table below
    usage = re.sub(r"\{(\w+)\}", lambda m: m.group(1).upper(), command.get_usage(ctx).strip())
    lines += ["```text", usage, "```", ""]
    rows = _param_rows(command, ctx)
    if rows:
        lines += ["| argument / option | | default | help |", "|---|---|---|---|", *rows, ""]
    lines += _subcommands(command, ctx, level + 1)
    return lines


def _subcommands(group, ctx, level: int) -> list[str]:
    lines = []
    for name in getattr(group, "list_commands", lambda ctx: [])(ctx):
        sub = group.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            lines += _command_doc(sub, sub.context_class(sub, info_name=name, parent=ctx), level)
    return lines


def cli_page() -> str:
    from siamese.cli import app

    command = typer.main.get_command(app)
    ctx = command.context_class(command, info_name="siamese")
    lines = [
        "# Command-line reference",
        "",
        "Generated from the commands themselves at every docs build (`docs/gen_pages.py`); "
        "`siamese COMMAND --help` prints the same. Every command prints results on stdout "
        "(`--json`: JSON only), progress on stderr (a bar in a terminal; in a log or a pipe, a line every 15 s "
        "with what is done, the rate and the time left: `SIAMESE_PROGRESS_SECONDS` sets the interval), and a bad "
        "input as one `error: ...` line with exit code 2.",
        "",
    ]
    top = command.get_usage(ctx).strip()
    lines += ["```text", top, "```", ""]
    return "\n".join(lines + _subcommands(command, ctx, 2))


def public_names() -> dict[str, list[str]]:
    """``siamese/__init__.py``'s lazy exports as {module: [names]}, read without importing it."""
    tree = ast.parse((ROOT / "siamese" / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_exports":
            mapping = ast.literal_eval(node.args[1])
            break
    else:  # pragma: no cover - the package always declares them
        raise RuntimeError("siamese/__init__.py has no lazy_exports(...) call")
    by_module: dict[str, list[str]] = defaultdict(list)
    for name, module in mapping.items():
        by_module["siamese" + module].append(name)
    return dict(sorted(by_module.items()))


def api_page() -> str:
    lines = [
        "# Python API reference",
        "",
        "The public names of the `siamese` package (`from siamese import ...`), each rendered from its "
        "docstrings by the docs site (`make docs`); in Python, `help(siamese.NAME)` prints the same. "
        "`import siamese` imports no torch until one of them is used. Before torch loads it sets "
        "`OMP_WAIT_POLICY=PASSIVE` unless the environment sets it (as the `siamese` command does): on a "
        "machine whose cores other processes share, PyTorch's threads otherwise spin while they wait and "
        "encoding took 20x longer. A script that imports torch before siamese should set it itself.",
        "",
    ]
    for module, names in public_names().items():
        lines += [f"## `{module}`", ""]
        for name in sorted(names):
            # a name that is its module's own last part is the module itself (``siamese.datasets``)
            lines += [f"::: {module if module.rpartition('.')[2] == name else f'{module}.{name}'}", ""]
    return "\n".join(lines)


def examples_page() -> str:
    lines = [
        "# Examples",
        "",
        "Runnable scripts under `examples/`, one per guide; each runs on small shared data "
        "(`SIAMESE_DATA`, see the [quickstart](index.md)) and is run by the tests.",
        "",
    ]
    for path in sorted((ROOT / "examples").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        lines += [f"## {path.name}", "", html.escape(doc.split("\n\n")[0], quote=False), ""]
        lines += [f"```bash\npython examples/{path.name}\n```", ""]
        lines += ["```python", path.read_text(encoding="utf-8").rstrip(), "```", ""]
    return "\n".join(lines)


PAGES = {"cli.md": cli_page, "api.md": api_page, "examples.md": examples_page}


if __name__ in ("__main__", "<run_path>"):  # python docs/gen_pages.py, or the gen-files plugin (runpy)
    import mkdocs_gen_files  # in a build: the site's pages; run directly: the files under docs/

    for page, make in PAGES.items():
        with mkdocs_gen_files.open(page, "w") as handle:
            handle.write(make() + "\n")
