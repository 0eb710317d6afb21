"""Loading tampered folders: every config.json / index.json / texts.jsonl field is checked (sizes
against the safetensors header, before allocating), non-finite weights are refused, and a
threshold outside the head's range is clipped."""

from __future__ import annotations

import json
import resource
import shutil
import struct
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch
from conftest import assert_user_error, run
from safetensors.torch import load_file, save_file

from siamese import ModelConfig, SiameseModel
from siamese.errors import ModelError
from siamese.search import DuplicateIndex
from siamese.search.index import SearchIndexError

PROBES = ["how do i learn python", "what is the best way to learn python", "where is the station", "is it raining"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    model = SiameseModel.build(PROBES, ModelConfig(dim=16, seed=0))
    return model.save(tmp_path_factory.mktemp("loading") / "model")


@pytest.fixture
def copy(saved, tmp_path) -> Path:
    return Path(shutil.copytree(saved, tmp_path / "model"))


def tamper(folder: Path, **fields) -> Path:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))
    return folder


def deep(n: int):
    value: object = 1
    for _ in range(n):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"vocab_size": 10**15}, "'vocab_size' must be"),
        ({"vocab_size": 2**24}, "vocab_size 16777216 does not match tokenizer.json"),
        ({"dim": 10**12}, "'dim' must be"),
        ({"dim": 60000}, "tensor 'embedding.weight' has shape"),
        ({"encoder_options": {"dim": 10**9}}, "invalid field"),
        ({"encoder_options": {"dim": 1000}}, "has shape"),
        ({"dim": -4}, "'dim' must be null or int in [1, 65536]"),
        ({"oov_buckets": -1}, "'oov_buckets'"),
        ({"char_buckets": 10**12}, "'char_buckets'"),
        ({"max_length": 0}, "'max_length'"),
        ({"dim": "sixteen"}, "'dim'"),
        ({"dim": True}, "'dim'"),
        ({"lowercase": "yes"}, "'lowercase'"),
        ({"threshold": "high"}, "'threshold'"),
        ({"char_ngrams": ["a", 3]}, "'char_ngrams'"),
        ({"encoder_options": [1, 2]}, "'encoder_options'"),
        ({"encoder_options": deep(50)}, "has no option 'a'"),  # checked against the encoder's keywords
        ({"encoder": 5}, "'encoder'"),
        ({"head": "nope"}, "unknown head"),
        ({"info": "x"}, "'info'"),
    ],
)
def test_tampered_config_is_a_one_line_error(copy, fields, message):
    tamper(copy, **fields)
    limit = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(
        resource.RLIMIT_AS, (8 << 30, limit[1])
    )  # an attempt to allocate TBs fails the test, not the machine
    try:
        with pytest.raises(ModelError, match="config.json|model.safetensors") as info:
            SiameseModel.load(copy)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, limit)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_deeply_nested_config_json(copy):
    text = (copy / "config.json").read_text()
    (copy / "config.json").write_text(text[:-2] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    with pytest.raises(ModelError, match="nested too deeply|invalid JSON"):
        SiameseModel.load(copy)


def test_cli_reports_a_tampered_config_in_one_line(copy):
    tamper(copy, dim=10**12)
    assert_user_error(run("predict", copy, "a", "b", check_ok=False), "config.json", "'dim'")


def test_damaged_safetensors_header(copy):
    weights = copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(struct.pack("<Q", 10**15) + data[8:])
    with pytest.raises(ModelError, match="not a safetensors file"):
        SiameseModel.load(copy)
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"] = [0, 10**12]
    raw = json.dumps(header).encode()
    weights.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])
    with pytest.raises(ModelError, match="damaged entry"):
        SiameseModel.load(copy)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused(copy, value):
    state = load_file(str(copy / "model.safetensors"))
    state["embedding.weight"][2, 3] = value
    save_file(state, str(copy / "model.safetensors"), metadata={"format": "siamese-model/1"})
    with pytest.raises(ModelError, match="'embedding.weight' holds 1 NaN or infinite value"):
        SiameseModel.load(copy)


def test_threshold_outside_the_head_range_is_clipped(copy):
    tamper(copy, threshold=1.0000005)
    model = SiameseModel.load(copy)
    assert model.threshold == 1.0
    assert model.predict(["how do i learn python"], ["how do i learn python"], threshold=0.99)[0]
    tamper(copy, threshold=-3.0)
    assert SiameseModel.load(copy).threshold == -1.0


def test_chosen_threshold_is_clipped(saved):
    model = SiameseModel.load(saved)
    assert model.set_threshold(1.0000005) == 1.0
    manhattan = SiameseModel.build(PROBES, ModelConfig(dim=8, head="manhattan", loss="contrastive"))
    assert manhattan.set_threshold(-0.2) == 0.0


# -- index folders ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def index_folder(saved, tmp_path_factory) -> Path:
    index = DuplicateIndex(SiameseModel.load(saved))
    index.add(PROBES)
    return index.save(tmp_path_factory.mktemp("index") / "idx")


def tamper_index(folder: Path, case: str) -> None:
    meta = json.loads((folder / "index.json").read_text())
    if case == "no texts":
        (folder / "texts.jsonl").unlink()
    elif case == "no faiss":
        (folder / "index.faiss").unlink()
    elif case == "texts not json":
        (folder / "texts.jsonl").write_text('{"id": "0", "text": "a"}\n{oops\n')
    elif case == "texts wrong type":
        (folder / "texts.jsonl").write_text('{"id": 0, "text": ["a"]}\n')
    elif case == "texts a list":
        (folder / "texts.jsonl").write_text("[1, 2]\n")
    elif case == "texts fewer":
        lines = (folder / "texts.jsonl").read_text().splitlines(keepends=True)
        (folder / "texts.jsonl").write_text("".join(lines[:-1]))
    elif case == "wrong width":
        index = faiss.IndexFlatIP(7)
        index.add(np.ones((len(PROBES), 7), dtype=np.float32))
        faiss.write_index(index, str(folder / "index.faiss"))
    elif case == "wrong kind":
        (folder / "index.json").write_text(json.dumps({**meta, "kind": "hnsw"}))
    elif case == "unknown kind":
        (folder / "index.json").write_text(json.dumps({**meta, "kind": "annoy"}))
    elif case == "bad size":
        (folder / "index.json").write_text(json.dumps({**meta, "size": "many"}))
    elif case == "faiss garbage":
        (folder / "index.faiss").write_bytes(b"not an index at all")
    elif case == "texts utf16 nul":
        (folder / "texts.jsonl").write_bytes("x".encode("utf-16-le"))


INDEX_CASES = [
    "no texts",
    "no faiss",
    "texts not json",
    "texts wrong type",
    "texts a list",
    "texts fewer",
    "wrong width",
    "wrong kind",
    "unknown kind",
    "bad size",
    "faiss garbage",
    "texts utf16 nul",
]


@pytest.mark.parametrize("case", INDEX_CASES)
def test_tampered_index_folder_is_a_one_line_error(index_folder, saved, tmp_path, case):
    folder = Path(shutil.copytree(index_folder, tmp_path / "idx"))
    tamper_index(folder, case)
    with pytest.raises((SearchIndexError, ModelError, Exception)) as info:
        DuplicateIndex.load(folder, SiameseModel.load(saved))
    from siamese.errors import SiameseError

    assert isinstance(info.value, SiameseError), repr(info.value)
    assert str(folder) in str(info.value) and "\n" not in str(info.value)


def test_cli_search_on_a_tampered_index(index_folder, saved, tmp_path):
    folder = Path(shutil.copytree(index_folder, tmp_path / "idx"))
    tamper_index(folder, "wrong width")
    assert_user_error(run("search", folder, "where is the station", "--model", saved, check_ok=False), "width 7")


def test_untampered_folders_still_load(saved, index_folder):
    model = SiameseModel.load(saved)
    index = DuplicateIndex.load(index_folder, model)
    assert index.search("where is the station", k=1)[0][0].text == "where is the station"
    assert torch.isfinite(torch.from_numpy(model.encode(PROBES))).all()
