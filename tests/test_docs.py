"""The documentation site (mkdocs.yml) builds with --strict, and its generated pages follow the code:
every command and option in the CLI reference, every public name in the API reference."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")
pytest.importorskip("mkdocs_gen_files", reason="the docs extra (pip install -e '.[docs]') builds the site")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _text(page: Path) -> str:
    return re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))


def test_cli_reference_lists_every_command_and_option(site):
    import typer.main

    from siamese.cli import app

    page = _text(site / "cli" / "index.html")
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="siamese")
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        assert f"siamese {name}" in page
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and not getattr(param, "hidden", False):
                    assert opt in page, (name, opt)
    assert "siamese index build" in page and "siamese emoji suggest" in page


def test_api_reference_renders_every_public_name(site):
    import siamese

    page = _text(site / "api" / "index.html")
    for name in siamese.__all__:
        if name != "__version__":
            assert name in page, name
    # rendered from the docstrings, not only named
    assert "One row per text" in page  # SiameseModel.encode's docstring


def test_guides_and_benchmarks_are_in_the_site(site):
    for page in [
        "guides/duplicates",
        "guides/dedupe",
        "guides/search",
        "guides/serving",
        "guides/training",
        "guides/student",
        "guides/emoji",
        "benchmarks",
        "architecture",
        "examples",
        "sentence-transformers",
    ]:
        assert (site / page / "index.html").is_file(), page


def test_the_committed_reference_pages_are_current():
    """docs/cli.md, api.md and examples.md are committed (GitHub shows them) and generated again
    by every site build: the committed copies must be what the code generates now."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reference_pages", ROOT / "docs" / "gen_pages.py")
    pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pages)  # not run as a script: writes nothing
    for page, make in pages.PAGES.items():
        committed = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert committed == make() + "\n", f"docs/{page} is stale: run python docs/gen_pages.py"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_every_relative_link_works_on_github_too():
    """A relative link in README.md or docs/ names a file of the repository (GitHub resolves it
    against the file; the site against docs/), and a #fragment a heading of that page."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    checked = 0
    for source in files:
        for target in LINK.findall(source.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, fragment = target.partition("#")
            file = (source.parent / path).resolve()
            assert file.exists(), f"{source.relative_to(ROOT)}: link to {target} (no such file)"
            if fragment and file.suffix == ".md":
                slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)}
                assert fragment in slugs, f"{source.relative_to(ROOT)}: link to {target} (no such heading)"
            checked += 1
    assert checked > 50


def _slug(heading: str) -> str:
    """A heading's anchor when the site (python-markdown's toc) and GitHub make it alike; "" when
    they differ (a link to it would work on one of them only)."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    site = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip())
    github = re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))
    return site if site == github else ""
