"""The package's shape, read statically from its source (ast over siamese/**/*.py, imports inside
functions included): no import cycle, the folders' layers run one way (command line -> HTTP ->
applications -> model core -> data -> foundations), no function body over 80 lines, and loading a
model imports no scikit-learn."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "siamese"
MAX_BODY_LINES = 80


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The siamese modules ``name`` imports anywhere in its source (a name imported from a package
    counts as its submodule when there is one)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read():
    assert "siamese.training.run" in GRAPH["siamese.cli.train"]
    assert "siamese.cross.train" in GRAPH["siamese.training.bi_encoder"]  # an import inside a function counts
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


# The folders of siamese/, bottom to top (docs/architecture.md draws the same): a module imports
# only from its own layer or the layers below.
LAYERS = [
    ("foundations", {"siamese", "errors", "version", "_lazy", "io", "runtime"}),
    ("data", {"data"}),
    ("model core", {"config", "models", "decision", "evaluation", "training", "cross"}),
    ("applications", {"search", "distill", "emoji", "label"}),
    ("HTTP", {"serve", "label.web"}),
    ("command line", {"cli", "__main__"}),
]


def _layer(name: str) -> int:
    """The layer of a module, by its folder (label/web.py, the labelling page, is an HTTP app)."""
    parts = name.split(".")[1:]
    for key in (".".join(parts[:2]), parts[0] if parts else "siamese"):  # a module's own entry first
        for index, (_, folders) in enumerate(LAYERS):
            if key in folders:
                return index
    raise AssertionError(f"{name}: in no layer of LAYERS (a new folder? place it there)")


def test_every_module_is_in_a_layer():
    assert {name: _layer(name) for name in MODULES}


def test_imports_never_run_up_a_layer():
    upward = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {d} ({LAYERS[_layer(d)][0]})"
        for m, deps in GRAPH.items()
        for d in deps
        if _layer(d) > _layer(m)
    ]
    assert upward == []


def test_the_lowest_modules_import_only_each_other():
    """Declarations, thresholds and the calibrator sit below everything (no model, no torch)."""
    lowest = {
        "siamese.errors",
        "siamese.config.options",
        "siamese.config.loss",
        "siamese.decision.threshold",
        "siamese.decision.calibrator",
    }
    for name in lowest:
        assert GRAPH[name] <= lowest, (name, GRAPH[name] - lowest)
    assert GRAPH["siamese.config.configs"] - lowest == {
        "siamese.models.encoders",
        "siamese.models.heads",
        "siamese.models.losses",
        "siamese.data.vocabulary",
        "siamese.io.manifest",  # the field table config.json is checked with (MANIFEST_FIELDS), torch-free
    }


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body, its docstring left out (a generated command has no body here)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def test_no_function_body_is_over_80_lines():
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_lines(node) > MAX_BODY_LINES:
                long.append(f"{name}.{node.name}: {_body_lines(node)} lines")
    assert long == []


def test_loading_a_model_imports_no_scikit_learn(trained):
    code = (
        "import sys; from siamese.models.loading import load_model; "
        f"m = load_model({str(trained.path)!r}); m.similarity_pairwise(['a cat'], ['a dog']); "
        "assert 'sklearn' not in sys.modules, 'sklearn imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_the_dedupe_function_does_not_hide_a_module():
    import siamese.search
    import siamese.search.pairs

    assert callable(siamese.search.dedupe) and not (PACKAGE / "search" / "dedupe.py").exists()
    assert siamese.search.duplicate_pairs is siamese.search.pairs.duplicate_pairs


def test_every_public_name_is_what_its_module_defines():
    """``siamese.learn`` is the function, not the module of the same name (it was the module: the training guide's
    ``siamese.learn(pairs, "minilm")`` failed); a name its module does not define is the module (``datasets``)."""
    code = """
import importlib, inspect, siamese
from siamese import learn
assert learn is siamese.learn and inspect.isfunction(learn), learn
assert list(inspect.signature(learn).parameters)[:2] == ["pairs", "source"]
assert inspect.ismodule(siamese.datasets) and callable(siamese.datasets.load)
for name in siamese.__all__:
    value = getattr(siamese, name)
    assert not inspect.ismodule(value) or name == "datasets", name
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_every_dotted_name_the_docs_give_resolves():
    """Each `siamese.x.y` the README and the docs name in code spans is importable as written (the
    sentence-transformers page named `siamese.loading.load_model`, which never existed)."""
    import importlib
    import re

    import siamese

    pages = [PACKAGE.parent / "README.md", *sorted((PACKAGE.parent / "docs").rglob("*.md"))]
    names = {
        m.rstrip(".")
        for page in pages
        for m in re.findall(r"`(siamese\.[A-Za-z_][A-Za-z0-9_.]*)", page.read_text(encoding="utf-8"))
    }
    assert "siamese.models.loading.load_model" in names and len(names) > 20
    for name in sorted(names):
        parts = name.split(".")
        value, done = siamese, ["siamese"]
        for part in parts[1:]:
            if not hasattr(value, part):
                try:
                    importlib.import_module(".".join([*done, part]))
                except ModuleNotFoundError:
                    pass
            assert hasattr(value, part), f"{name}: siamese has no {'.'.join([*done, part])}"
            value = getattr(value, part)
            done.append(part)
