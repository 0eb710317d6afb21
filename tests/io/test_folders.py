"""Output folders (siamese.io.atomic): nothing that is not ours is deleted, a crash at any instant
leaves the old or the new folder complete under its name, concurrent writers are serialized."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, run

import siamese.io.atomic as atomic
from siamese import ModelConfig, SiameseModel
from siamese.errors import OutputError

PROBES = ["how do i learn python", "what is the best way to learn python", "where is the station"]
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def forked_writer(target: Path, how: str, saves: int | None = None) -> tuple[int, int]:
    """A child process that saves two different models over ``target``, again and again (``saves``
    times, or until killed). ``how``: "exchange", or "fallback" (two renames, as where renameat2 is
    missing). Forked, not started: the child has torch and siamese loaded already, so a kill costs
    milliseconds instead of an interpreter start. Returns (pid, read end of a pipe that gets "r" when
    the child is ready and "d" when it is done)."""
    models = [SiameseModel.build(PROBES, ModelConfig(dim=64, seed=s)) for s in (1, 2)]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read)
            if how == "fallback":
                atomic._exchange_fn = None
            os.write(write, b"r")
            i = 0
            while saves is None or i < saves:
                models[i % 2].save(target)
                i += 1
            os.write(write, b"d")
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    assert os.read(read, 1) == b"r"
    return pid, read


def exit_code(pid: int) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def small_model(seed: int = 0) -> SiameseModel:
    return SiameseModel.build(PROBES, ModelConfig(dim=16, seed=seed))


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- never delete what is not ours -------------------------------------------------------------------


def test_folder_of_user_files_is_refused_and_untouched(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "thesis.txt").write_text("years of work")
    with pytest.raises(OutputError, match="files siamese did not write.*--overwrite"):
        small_model().save(target)
    assert names(target) == ["thesis.txt"]
    assert (target / "thesis.txt").read_text() == "years of work"
    assert names(tmp_path) == ["mine"]  # no temporary folder, no lock left


def test_the_folder_you_are_in_is_never_an_output(tmp_path, monkeypatch):
    """`--out .` swapped the shell's own folder for the model, deleting its files with --overwrite, and then
    failed on a relative path ('model.onnx: No such file or directory') after writing."""
    from conftest import assert_user_error, run

    here = tmp_path / "proj"
    (here / "data").mkdir(parents=True)
    (here / "notes.txt").write_text("mine")
    monkeypatch.chdir(here / "data")
    for out, overwrite in ((".", True), ("..", True), (".", False)):
        with pytest.raises(OutputError, match="is the folder you are in, or holds it"):
            small_model().save(out, overwrite=overwrite)
    monkeypatch.chdir(here)
    assert_user_error(run("pretrained", "minilm", "--out", ".", "--overwrite", check_ok=False), "the folder you are in")
    assert names(here) == ["data", "notes.txt"] and names(tmp_path) == ["proj"]


def test_overwrite_replaces_a_foreign_folder(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("x")
    small_model().save(target, overwrite=True)
    assert names(target) == ["README.md", "config.json", "model.safetensors", "tokenizer.json"]


def test_empty_folder_and_siamese_folder_are_written(tmp_path):
    (tmp_path / "empty").mkdir()
    small_model().save(tmp_path / "empty")
    small_model(seed=3).save(tmp_path / "empty")  # a siamese folder: replaced without --overwrite
    assert SiameseModel.load(tmp_path / "empty").config.seed == 3


def test_a_file_where_the_folder_belongs_is_refused(tmp_path):
    target = tmp_path / "model"
    target.write_text("a file")
    with pytest.raises(OutputError, match="a file is there"):
        small_model().save(target, overwrite=True)
    assert target.read_text() == "a file"


def test_cli_refuses_user_folder_and_file_before_any_work(tmp_path, data_dir, model_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    assert_user_error(
        run("train", "--data", data_dir / "msrp/msr-para-val.tsv", "--out", mine, "--epochs", 1, check_ok=False),
        str(mine),
        "--overwrite",
    )
    assert names(mine) == ["keep.txt"]
    texts = tmp_path / "texts.txt"
    texts.write_text("one question\nanother question\n")
    file = tmp_path / "out.txt"
    file.write_text("precious")
    assert_user_error(
        run("index", "build", model_path, "--data", texts, "--out", file, check_ok=False), str(file), "a file is there"
    )
    assert file.read_text() == "precious"
    # --out . (the current folder, full of the user's files) is refused too
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "siamese"),
            "index",
            "build",
            str(model_path),
            "--data",
            str(texts),
            "--out",
            ".",
        ],
        cwd=mine,
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert_user_error(proc, "is the folder you are in")  # not "pass --overwrite", which swapped it from under you
    assert names(mine) == ["keep.txt"]
    # with --overwrite the user asked for it
    run("index", "build", model_path, "--data", texts, "--out", mine, "--overwrite", "--quiet")
    assert "index.json" in names(mine) and "keep.txt" not in names(mine)


def test_unwritable_output_is_one_line(tmp_path, model_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores permissions")
    locked = tmp_path / "locked"
    locked.mkdir()
    texts = tmp_path / "texts.txt"
    texts.write_text("one question\n")
    locked.chmod(0o500)
    try:
        assert_user_error(
            run("index", "build", model_path, "--data", texts, "--out", locked / "idx", check_ok=False),
            "Permission denied",
        )
        assert_user_error(
            run("encode", model_path, "--data", texts, "--out", locked / "v.npy", check_ok=False), "Permission denied"
        )
    finally:
        locked.chmod(0o700)
    assert names(locked) == []


# -- crashes -----------------------------------------------------------------------------------------


def test_stale_temporary_folders_are_cleaned_and_a_hidden_old_folder_restored(tmp_path):
    target = small_model(seed=1).save(tmp_path / "model")
    # what a writer killed between the fallback's two renames leaves: no model, the old one hidden
    os.replace(target, tmp_path / ".model.old-999999")
    (tmp_path / ".model.siamese-abcd1234.tmp").mkdir()  # a killed writer's half folder
    (tmp_path / ".model.siamese-abcd1234.tmp" / "config.json").write_text("{")
    (tmp_path / ".model.x.siamese-keep0000.tmp").mkdir()  # another target's ("model.x"): not ours to delete
    with atomic.target_lock(target):
        atomic.recover(target)
    assert SiameseModel.load(target).config.seed == 1
    assert names(tmp_path) == [".model.x.siamese-keep0000.tmp", "model"]


@pytest.mark.slow  # kills writer subprocesses
@pytest.mark.parametrize("how", ["exchange", "fallback"])
def test_kill_at_random_instants_leaves_a_loadable_folder(tmp_path, how):
    if how == "exchange" and atomic._exchange_fn is None:
        pytest.skip("no renameat2 here")
    target = tmp_path / "model"
    rng = random.Random(0)
    small_model().save(target)
    seeds = set()
    for _ in range(8):
        pid, ready = forked_writer(target, how)
        time.sleep(rng.uniform(0.0, 0.4))  # many saves per kill: the kill lands anywhere in one
        os.kill(pid, signal.SIGKILL)
        assert exit_code(pid) == -signal.SIGKILL
        os.close(ready)
        if how == "fallback":  # a crash between the two renames is repaired by the next writer
            with atomic.target_lock(target):
                atomic.recover(target)
        model = SiameseModel.load(target)  # complete: old or new
        assert model.encode(PROBES).shape == (3, model.dim)
        seeds.add(model.config.seed)
    small_model(seed=7).save(target)  # the next write cleans up whatever the kills left
    assert names(tmp_path) == ["model"]
    assert seeds & {1, 2}  # the writers did replace the folder


@pytest.mark.slow  # writer subprocesses
def test_concurrent_writers_are_serialized(tmp_path):
    target = tmp_path / "model"
    small_model().save(target)
    writers = [forked_writer(target, "exchange", saves=15) for _ in range(3)]
    missing, running = 0, {pid for pid, _ in writers}
    while running:  # the name always holds a complete model
        if not (target / "config.json").is_file():
            missing += 1
        running = {pid for pid in running if os.waitpid(pid, os.WNOHANG) == (0, 0)}
        time.sleep(0.01)
    for _, done in writers:
        assert os.read(done, 1) == b"d"  # each wrote its 15 saves (a failed save exits before "d")
        os.close(done)
    assert missing == 0 or atomic._exchange_fn is None
    assert SiameseModel.load(target).config.seed in (1, 2)
    assert names(tmp_path) == ["model"]


def test_a_held_lock_times_out_with_a_clear_error(tmp_path, monkeypatch):
    target = tmp_path / "model"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, siamese.io.atomic as a, pathlib\n"
            "with a.target_lock(pathlib.Path(sys.argv[1])):\n print('held', flush=True); time.sleep(60)",
            str(target),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("SIAMESE_LOCK_TIMEOUT", "0.5")
        with pytest.raises(OutputError, match="another process is writing it"):
            small_model().save(target)
    finally:
        holder.kill()
        holder.wait()
    small_model().save(target)  # the holder is gone: its lock went with it
    assert names(tmp_path) == ["model"]


def test_files_and_folder_are_fsynced_before_the_rename(tmp_path, monkeypatch):
    synced, order = [], []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        atomic.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd))
    )
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: (order.append(len(synced)), real_replace(a, b)))
    small_model().save(tmp_path / "model")
    assert {Path(p).name for p in synced[: order[0]]} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert str(tmp_path) in synced[order[0] :]  # the parent, after the rename


def test_index_json_marks_an_index_folder_as_ours(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "index.json").write_text(json.dumps({"format": "siamese-index/1"}))
    (folder / "texts.jsonl").write_text("")
    assert atomic.siamese_kind(folder) == "index"
    (folder / "index.json").write_text(json.dumps({"format": "someone-else"}))
    assert atomic.siamese_kind(folder) is None
    np.testing.assert_equal(names(folder), ["index.json", "texts.jsonl"])
