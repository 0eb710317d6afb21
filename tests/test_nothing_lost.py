"""Nothing lost: bad bytes anywhere in an input, damaged on-disk indexes and
checkpoints, leftovers of killed writes, two concurrent ``index add``, and outputs that would
replace an input. Each test failed before its fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import invoke

from siamese import ModelConfig, SiameseModel, read_pairs, read_texts
from siamese.data.records import read_records
from siamese.errors import DataError
from siamese.evaluation.scoring import score_file

TEXTS = ["how do i learn python", "what is the best way to learn python", "where is the station", "is it raining"]


@pytest.fixture(scope="module")
def tiny_model() -> SiameseModel:
    return SiameseModel.build(TEXTS, ModelConfig(dim=16))


def pair_lines(n: int) -> list[bytes]:
    return [b"id,question1,question2\n"] + [
        f"{i},how do I reset password {i},what is life {i}\n".encode() for i in range(n)
    ]


# -- 1. the whole file is checked for NUL bytes and UTF-8, not its first 64 KiB ----------------------------------


def test_a_nul_byte_after_the_first_64_kib_is_refused_naming_its_line(tmp_path):
    lines = pair_lines(3000)  # ~110 KB
    lines[2500] = lines[2500].replace(b"reset", b"re\0set")
    path = tmp_path / "nul.csv"
    path.write_bytes(b"".join(lines))
    assert path.stat().st_size > 1 << 16
    with pytest.raises(DataError, match=r"nul\.csv:2501: holds NUL bytes"):
        read_pairs(path, format="generic", text1="question1", text2="question2", label=None)
    txt = tmp_path / "nul.txt"
    txt.write_bytes(b"a text\n" * 20000 + b"bad\0text\n")
    with pytest.raises(DataError, match=r"nul\.txt:20001: holds NUL bytes"):
        read_texts(txt)


def test_score_refuses_a_bad_byte_in_a_column_it_only_copies(tmp_path, tiny_model):
    lines = pair_lines(3000)
    lines[2990] = b"caf\xe9" + lines[2990]  # in the id column, which score copies to its output
    data, out = tmp_path / "p.csv", tmp_path / "s.csv"
    data.write_bytes(b"".join(lines))
    with pytest.raises(DataError, match=r"p\.csv:2991: not valid UTF-8 \(byte 0xe9\)"):
        score_file(tiny_model, data, out, text1="question1", text2="question2")
    assert not out.exists()
    lines[2990] = lines[2990].replace(b"\xe9", b"\0")
    data.write_bytes(b"".join(lines))
    with pytest.raises(DataError, match=r"p\.csv:2991: holds NUL bytes"):
        score_file(tiny_model, data, out, text1="question1", text2="question2")
    assert not out.exists()


def test_dedupe_records_refuse_a_bad_byte_in_another_column(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"text,note\nhow do I reset my password,ok\nwhat is life insurance,caf\xe9\n")
    with pytest.raises(DataError, match=r"x\.csv:3: not valid UTF-8"):
        read_records(path)


def test_a_multibyte_character_across_chunks_is_valid(tmp_path):
    from siamese.data import input_files

    path = tmp_path / "long.txt"
    # é (2 bytes) straddles the 1 MiB chunk boundary
    path.write_bytes(b"a" * ((1 << 20) - 1) + "é\nnext\n".encode())
    with input_files.open_text(path) as f:
        assert f.read().endswith("é\nnext\n")
    path.write_bytes(b"a\n" * (1 << 19) + b"\xc3(\n")
    with pytest.raises(DataError, match=r"long\.txt:524289: not valid UTF-8 \(byte 0xc3\)"):
        input_files.open_text(path).__enter__()


# -- 2. an on-disk index's lists file is checked before FAISS maps it -------------------------------------------

WORDS = "apple banana cherry delta echo fox golf hotel india juliet kilo lima mike nov oscar papa".split()


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "siamese", *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.fixture(scope="module")
def ondisk(tmp_path_factory, tiny_model) -> tuple[Path, Path]:
    from siamese.search import DuplicateIndex

    root = tmp_path_factory.mktemp("ondisk")
    tiny_model.save(root / "model")
    model = SiameseModel.load(root / "model")
    index = DuplicateIndex(model, kind="ondisk")
    index.add([f"{a} {b} {c}" for a in WORDS for b in WORDS for c in WORDS[:3]][:600])
    index.save(root / "index")
    return root / "model", root / "index"


def _damaged_lists(folder: Path, how: str, other: Path) -> None:
    lists = folder / "lists.ivfdata"
    size = lists.stat().st_size
    if how == "truncated":
        os.truncate(lists, size - 1000)
    elif how == "tenth":
        os.truncate(lists, size // 10)
    elif how == "empty":
        os.truncate(lists, 0)
    elif how == "symlink":
        lists.unlink()
        lists.symlink_to(other)
    elif how == "random":
        lists.write_bytes(np.random.default_rng(0).bytes(size))
    elif how == "missing":
        lists.unlink()


@pytest.mark.slow  # a subprocess each: a damaged lists file used to kill the process with SIGBUS
@pytest.mark.parametrize("how", ["truncated", "tenth", "empty", "symlink", "random", "missing"])
def test_a_damaged_ondisk_lists_file_is_a_one_line_error(ondisk, tmp_path, how):
    model, index = ondisk
    bad = Path(shutil.copytree(index, tmp_path / "bad"))
    _damaged_lists(bad, how, model / "model.safetensors")
    proc = cli("search", bad, "apple banana cherry", "--model", model)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "lists.ivfdata" in lines[0], proc.stderr
    assert "lists.ivfdata" in lines[0]
    assert invoke("search", index, "apple banana cherry", "--model", model).returncode == 0  # the intact one: here


def test_index_json_dim_names_the_right_widths(ondisk, tmp_path):
    from siamese.search import DuplicateIndex
    from siamese.search.index import SearchIndexError

    model, index = ondisk
    bad = Path(shutil.copytree(index, tmp_path / "bad"))
    meta = json.loads((bad / "index.json").read_text())
    (bad / "index.json").write_text(json.dumps({**meta, "dim": 7}))
    with pytest.raises(SearchIndexError) as e:
        DuplicateIndex.load(bad, SiameseModel.load(model))
    assert "7" in str(e.value) and "16" in str(e.value) and "index.json" in str(e.value)


# -- 3. every field of a training checkpoint is checked before a resume uses it --------------------------------


def synthetic_pairs(n: int = 96):
    from siamese.data.pairs import Pairs

    rng = np.random.default_rng(0)
    text1 = [" ".join(rng.choice(WORDS, 4)) for _ in range(n)]
    text2 = [t if i % 2 else " ".join(rng.choice(WORDS, 4)) for i, t in enumerate(text1)]
    return Pairs(text1, text2, np.array([i % 2 for i in range(n)], dtype=np.int8), source="synthetic")


def quick_train(checkpoint: Path, resume: bool = False):
    from siamese import TrainConfig, train

    config = TrainConfig(epochs=1, batch_size=32)
    return train(
        synthetic_pairs(),
        synthetic_pairs(32),
        model_config=ModelConfig(dim=16),
        config=config,
        checkpoint=checkpoint,
        resume=resume,
        progress=False,
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ck") / "ck"
    quick_train(folder)
    return folder


def _state(folder: Path) -> dict:
    return json.loads((folder / "trainer_state.json").read_text())


def _tamper(folder: Path, how: str) -> None:
    state, file = _state(folder), folder / "trainer_state.json"
    tensors = folder / "trainer_state.safetensors"
    if how == "list":
        file.write_text("[]")
    elif how == "truncated tensors":
        os.truncate(tensors, tensors.stat().st_size // 2)
    elif how == "model tensors":
        shutil.copyfile(folder / "model.safetensors", tensors)
    elif how == "random tensors":
        tensors.write_bytes(np.random.default_rng(1).bytes(tensors.stat().st_size))
    elif how.startswith("trainer."):
        field, value = how.split(".", 1)[1].split("=")
        state["trainer"][field] = json.loads(value)
        file.write_text(json.dumps(state))
    else:  # meta=..., trainer=...
        field, value = how.split("=")
        state[field] = json.loads(value)
        file.write_text(json.dumps(state))


DAMAGE = [
    "list",
    "truncated tensors",
    "model tensors",
    "random tensors",
    'meta="x"',
    "meta=[]",
    'meta={"train_config": []}',
    "trainer=[]",
    "trainer=null",
    'trainer.epoch="2"',
    "trainer.epochs=-1",
    "trainer.optimizers={}",
    'trainer.weights={"tensor": "absent"}',
    'trainer.weights={"oops": 1}',
    'trainer.numpy_rng={"state": 1}',
    "trainer.fitted=[]",
    'trainer.fitted={"history": 1}',
]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_checkpoint_is_a_one_line_error(checkpoint, tmp_path, how):
    from siamese.errors import SiameseError

    bad = Path(shutil.copytree(checkpoint, tmp_path / "ck"))
    _tamper(bad, how)
    with pytest.raises(SiameseError) as e:
        quick_train(bad, resume=True)
    assert "\n" not in str(e.value) and str(bad) in str(e.value)


@pytest.mark.parametrize("meta", ['{"run": []}', '{"run": {"cli": []}}', '{"run": {"cli": {"data": 3}}}'])
def test_train_resume_with_a_damaged_meta_is_a_one_line_error(checkpoint, tmp_path, meta):
    from conftest import assert_user_error, run

    bad = Path(shutil.copytree(checkpoint, tmp_path / "ck"))
    _tamper(bad, f"meta={meta}")
    assert_user_error(run("train", "--resume", bad, check_ok=False), str(bad))


# -- 4. the temporary folder and lock of a killed write are cleared by the next command on the target ---------


def _leave_leftovers(target: Path) -> list[Path]:
    """What a write killed with SIGKILL leaves beside ``target``: its temporary folder and its lock file."""
    tmp = target.with_name(f".{target.name}.siamese-k1ll3d_x.tmp")
    tmp.mkdir()
    (tmp / "texts.jsonl").write_text("a full copy of the data\n")
    lock = target.with_name(f".{target.name}.lock")
    lock.write_text("")
    return [tmp, lock]


def _hold_lock(target: Path) -> subprocess.Popen:
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(target.with_name(f".{target.name}.lock"))], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_loading_a_model_clears_a_killed_writes_leftovers_but_not_a_live_ones(tmp_path, tiny_model):
    model = tiny_model.save(tmp_path / "M")
    left = _leave_leftovers(model)
    holder = _hold_lock(model)  # a live writer: its folder and lock stay
    try:
        SiameseModel.load(model)
        assert all(p.exists() for p in left)
    finally:
        holder.kill()
        holder.wait()
    SiameseModel.load(model)  # the writer is dead: its leftovers go
    assert not any(p.exists() for p in left), sorted(p.name for p in tmp_path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["M"]


def test_index_load_and_dedupe_rethreshold_clear_leftovers(tmp_path, tiny_model):
    from siamese.search import DuplicateIndex
    from siamese.search.run import DedupeRun, dedupe

    model = SiameseModel.load(tiny_model.save(tmp_path / "M"))
    index = DuplicateIndex(model)
    index.add(TEXTS)
    index.save(tmp_path / "IDX")
    left = _leave_leftovers(tmp_path / "IDX")
    DuplicateIndex.load(tmp_path / "IDX", model)
    assert not any(p.exists() for p in left)
    dedupe(model, TEXTS * 2, tmp_path / "RUN")
    left = _leave_leftovers(tmp_path / "RUN")
    DedupeRun.load(tmp_path / "RUN").rethreshold(0.9)
    assert not any(p.exists() for p in left)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["IDX", "M", "RUN"]


def test_a_file_output_clears_the_temporary_file_of_a_killed_write(tmp_path, tiny_model):
    data, out = tmp_path / "p.csv", tmp_path / "s.csv"
    data.write_bytes(b"".join(pair_lines(10)))
    stale = tmp_path / ".s.csv.k1ll3d_x.tmp"
    stale.write_text("half a score file")
    score_file(tiny_model, data, out, text1="question1", text2="question2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "s.csv"]


# -- 5. two `index add` on one index serialise on its lock and keep every text of both -----------------------


@pytest.mark.slow  # two real processes
def test_two_concurrent_index_adds_keep_every_text(tmp_path, tiny_model):
    from siamese.search import DuplicateIndex

    model = tiny_model.save(tmp_path / "M")
    texts = [f"{a} {b} {c} {d}" for a in WORDS for b in WORDS for c in WORDS for d in WORDS[:4]]
    (tmp_path / "base.txt").write_text("\n".join(texts[:300]) + "\n")
    (tmp_path / "a.txt").write_text("\n".join(texts[300:700]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(texts[700:1100]) + "\n")
    build = ("index", "build", model, "--data", tmp_path / "base.txt", "--out", tmp_path / "IDX")
    assert invoke(*build).returncode == 0  # the adds below are the two processes
    for trial in range(2):
        if trial:  # again from 300, the two started the other way round
            shutil.rmtree(tmp_path / "IDX")
            assert invoke(*build).returncode == 0
        names = ["a.txt", "b.txt"] if trial == 0 else ["b.txt", "a.txt"]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "siamese",
                    "index",
                    "add",
                    str(tmp_path / "IDX"),
                    "--data",
                    str(tmp_path / n),
                    "--json",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in names
        ]
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
        sizes = sorted(json.loads(o[0])["size"] for o in outs)
        assert sizes == [700, 1100], outs
        index = DuplicateIndex.load(tmp_path / "IDX", SiameseModel.load(model))
        assert len(index) == 1100 and sorted(index.texts) == sorted(texts[:1100])
        assert sorted(p.name for p in tmp_path.iterdir()) == ["IDX", "M", "a.txt", "b.txt", "base.txt"]


# -- 6. an input is never an output: not equal, not holding it, not inside it; with or without --overwrite -------


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _quora(path: Path, n: int = 64) -> Path:
    rows = ["id,qid1,qid2,question1,question2,is_duplicate"]
    pairs = synthetic_pairs(n)
    rows += [
        f"{i},{2 * i},{2 * i + 1},{a},{b},{y}"
        for i, (a, b, y) in enumerate(zip(pairs.text1, pairs.text2, pairs.labels))
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def folders(tmp_path, tiny_model):
    from siamese.search import DuplicateIndex

    for name in ("M", "M6", "T", "M20", "M27", "M28"):
        tiny_model.save(tmp_path / name)
    index = DuplicateIndex(SiameseModel.load(tmp_path / "M"))
    index.add(TEXTS)
    index.save(tmp_path / "IDX")
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    _quora(tmp_path / "pairs.csv")
    _quora(tmp_path / "M6" / "texts.jsonl")  # a CSV of pairs the user keeps in a model folder
    return tmp_path


CASES = [
    ("index", "build", "{M}", "--data", "{IDX}/texts.jsonl", "--out", "{IDX}"),
    ("train", "--data", "{M6}/texts.jsonl", "--format", "quora", "--out", "{M6}", "--epochs", "1", "--dim", "8"),
    ("train", "--data", "{pairs}", "--loss", "distill", "--teacher", "{T}", "--out", "{T}", "--epochs", "1"),
    ("index", "build", "{M20}", "--data", "{texts}", "--out", "{M20}", "--overwrite"),
    ("encode", "{M27}", "--data", "{texts}", "--out", "{M27}/model.safetensors", "--overwrite", "--quiet"),
    ("evaluate", "{M28}", "--data", "{pairs}", "--errors", "{M28}/tokenizer.json", "--overwrite"),
    ("score", "{M}", "--data", "{pairs}", "--out", "{M}/scores.csv"),
    ("dedupe", "{M}", "--data", "{texts}", "--out", "{M}/run"),
]


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c[:2]) + f" {i}" for i, c in enumerate(CASES)])
def test_an_output_never_replaces_or_lands_in_an_input(folders, case):
    from conftest import assert_user_error, run

    paths = {p.name.split(".")[0]: p for p in folders.iterdir()}
    before = {name: _snapshot(p) for name, p in paths.items() if p.is_dir()}
    args = [a.format(**{k: str(v) for k, v in paths.items()}) for a in case]
    assert_user_error(run(*args, check_ok=False), "this command reads")
    after = {name: _snapshot(p) for name, p in paths.items() if p.is_dir()}
    assert after == before
    assert sorted(p.name for p in folders.iterdir()) == sorted(p.name for p in paths.values())


def test_check_not_input_rule(tmp_path):
    from siamese.errors import OutputError
    from siamese.io.atomic import check_not_input

    folder, file = tmp_path / "in", tmp_path / "in" / "data.csv"
    folder.mkdir()
    file.write_text("x\n")
    (tmp_path / "link").symlink_to(folder)
    for out, inputs in [
        (file, [file]),
        (folder, [file]),  # holds it
        (folder / "new.npy", [folder]),  # inside it
        (tmp_path / "link" / "data.csv", [file]),  # the same file through a link
        (tmp_path, [folder, None]),
    ]:
        with pytest.raises(OutputError, match="this command reads"):
            check_not_input(out, inputs)
    check_not_input(tmp_path / "out", [file, folder, None, tmp_path / "absent"])
    check_not_input(tmp_path / "in2", [folder])  # a sibling whose name starts the same


# -- found by the probe: a damaged dedupe run folder --------------------------------------------------------------


@pytest.mark.parametrize(
    "name, damage",
    [
        ("records.jsonl", b""),
        ("pairs.npz", b""),
        ("vectors.npy", b""),
        ("run.json", {"floor": "x"}),
        ("run.json", {"mode": "other"}),
        ("run.json", {"k": -1}),
        ("result.json", {"threshold": "x"}),
        ("result.json", {"min_size": 0}),
        ("result.json", {"clustering": 5}),
    ],
)
def test_a_damaged_dedupe_run_is_a_one_line_error(tmp_path, tiny_model, name, damage):
    from siamese.search.index import SearchIndexError
    from siamese.search.run import DedupeRun, dedupe

    model = SiameseModel.load(tiny_model.save(tmp_path / "M"))
    dedupe(model, TEXTS * 2 + [t + " again" for t in TEXTS], tmp_path / "RUN", threshold=0.5)
    file = tmp_path / "RUN" / name
    if isinstance(damage, bytes):
        file.write_bytes(damage)
    else:
        file.write_text(json.dumps({**json.loads(file.read_text()), **damage}))
    with pytest.raises(SearchIndexError, match=name.replace(".", r"\.")) as e:
        DedupeRun.load(tmp_path / "RUN").rethreshold(0.9)
    assert "\n" not in str(e.value)


def test_emoji_outputs_never_land_in_their_inputs(tmp_path):
    from conftest import assert_user_error, run

    vae = tmp_path / "vae"
    vae.mkdir()
    (vae / "config.json").write_text("{}")
    before = _snapshot(vae)
    assert_user_error(run("emoji", "encode", vae, "--out", vae / "codes.csv", check_ok=False), "this command reads")
    assert_user_error(run("emoji", "generate", vae, "--out", vae, check_ok=False), "this command reads")
    assert_user_error(
        run("emoji", "suggest", vae, "hello", "--png", vae / "x.png", check_ok=False), "this command reads"
    )
    assert _snapshot(vae) == before
