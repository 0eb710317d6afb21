"""The C++ kernel build lock (siamese.runtime.kernels): a lock left by a killed build is taken over, a build
never waits forever, and the cache is keyed by source, torch, Python and instruction set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from siamese.runtime import kernels

REPO = Path(__file__).resolve().parents[2]
LOAD = (
    "import warnings, siamese.runtime.kernels as k\n"
    "with warnings.catch_warnings(record=True) as w:\n"
    "    warnings.simplefilter('always')\n"
    "    m = k.load()\n"
    "print('built' if m is not None else 'fallback', *[str(x.message) for x in w], flush=True)"
)

pytestmark = pytest.mark.slow  # C++ builds of the kernel and subprocesses holding their lock


def env(root: Path, **extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TORCH_EXTENSIONS_DIR": str(root), "SIAMESE_KERNELS": "1", **extra}


def build_folder(root: Path) -> Path:
    """Where torch builds the kernels under the extensions folder ``root`` (created)."""
    return Path(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from torch.utils.cpp_extension import "
                "_get_build_directory as g; print(g(sys.argv[1], False))",
                kernels.this_build_name(),
            ],
            env=env(root),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )


def seeded(root: Path) -> Path:
    """A private extensions folder, seeded with this machine's cached build when there is one (no 30 s compile)."""
    from torch.utils.cpp_extension import _get_build_directory

    cached = Path(_get_build_directory(kernels.this_build_name(), verbose=False))
    if any(cached.glob("*.so")):
        target = build_folder(root)
        shutil.rmtree(target)
        shutil.copytree(cached, target)
    return root


@pytest.fixture
def root(tmp_path) -> Path:
    return seeded(tmp_path / "ext")


def test_cache_name_depends_on_source_torch_and_isa():
    a = kernels.cache_name(b"source", "AVX2", "2.13.0")
    assert a == kernels.cache_name(b"source", "AVX2", "2.13.0")
    assert (
        len(
            {
                a,
                kernels.cache_name(b"source2", "AVX2", "2.13.0"),
                kernels.cache_name(b"source", "AVX512", "2.13.0"),
                kernels.cache_name(b"source", "AVX2", "2.12.0"),
                kernels.cache_name(b"source", "AVX2", "2.13.0", where="/other/checkout|/other/venv/torch"),
            }
        )
        == 5
    )


def test_a_lock_left_by_a_killed_build_is_taken_over(root):
    (build_folder(root) / "lock").touch()  # torch's baton after a kill -9 mid-build: waited on forever before
    proc = subprocess.run([sys.executable, "-c", LOAD], env=env(root), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("built"), proc.stdout + proc.stderr


def test_a_build_held_by_a_live_process_times_out_to_pytorch_ops(root):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib, siamese.io.atomic as a\n"
            "with a.target_lock(pathlib.Path(sys.argv[1])):\n print('held', flush=True); time.sleep(120)",
            str(build_folder(root)),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env(root),
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = subprocess.run(
            [sys.executable, "-c", LOAD],
            env=env(root, SIAMESE_KERNELS_TIMEOUT="1"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("fallback") and "using PyTorch ops" in proc.stdout, proc.stdout
    finally:
        holder.kill()
        holder.wait()


def test_a_second_load_in_one_process_reuses_the_other_folders_build(tmp_path):
    """Was: torch numbered the second load of the name from another folder (name_v1), compiled it
    there and left that folder's ninja file pointing at name_v1, so every later process recompiled
    (~30 s each: the first training of many CLI runs and tests)."""
    first, second = seeded(tmp_path / "a"), seeded(tmp_path / "b")
    script = (
        "import os, sys, siamese.runtime.kernels as k\n"
        "os.environ['TORCH_EXTENSIONS_DIR'] = sys.argv[1]; a = k.load(); k._build.cache_clear()\n"
        "os.environ['TORCH_EXTENSIONS_DIR'] = sys.argv[2]; b = k.load()\n"
        "print(a.__name__, b.__name__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(first), str(second)],
        env=env(first),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [kernels.this_build_name(), kernels.this_build_name()]
    assert f"{kernels.this_build_name()}_v" not in (build_folder(second) / "build.ninja").read_text()
