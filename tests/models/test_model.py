"""SiameseModel: encode/similarity contracts, the model folder round trip, load errors, atomic save."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import siamese.models.siamese
from siamese import ModelConfig, ModelError, SiameseModel
from siamese.errors import ConfigError, OutputError

PROBES = [
    "How do I learn Python?",
    "What is the best way to learn Python quickly and for free as a complete beginner?",
    "Why?",
    "When will I see you?",
    "When can I see you again?",
    "Do they enjoy eating the dessert?",
    "Do they like hiking in the desert?",
    "",  # nothing but [UNK]
    "zzqx unseenword anotherone",
]


def small_model(texts=PROBES, **config) -> SiameseModel:
    return SiameseModel.build(texts, ModelConfig(dim=16, **config))


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def leftovers(parent: Path, name: str) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]


# -- encode / similarity -----------------------------------------------------------------------


def test_encode_returns_unit_vectors(trained):
    vectors = trained.model.encode(PROBES)
    assert vectors.shape == (len(PROBES), trained.model.dim) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert trained.model.encode("one text").shape == (trained.model.dim,)  # a str: one vector


def test_encode_keeps_input_order_despite_length_sorting(trained):
    model = trained.model
    together = model.encode(PROBES)
    alone = np.stack([model.encode([t])[0] for t in PROBES])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    reversed_ = model.encode(PROBES[::-1])[::-1]
    np.testing.assert_allclose(together, reversed_, atol=1e-5)
    # distinct texts really do get distinct vectors (so the order check means something)
    assert np.abs(together[0] - together[1]).max() > 1e-2


def test_encode_large_batch_uses_length_groups_and_matches_small_batches(trained):
    texts = trained.val_pairs.text1 + trained.val_pairs.text2[:200]  # 700 texts of mixed length
    big = trained.model.encode(texts, batch_size=1024)  # >= 512 rows: split into length groups
    small = trained.model.encode(texts, batch_size=7)
    np.testing.assert_allclose(big, small, atol=1e-5)
    for i in (0, 123, 699):
        np.testing.assert_allclose(big[i], trained.model.encode([texts[i]])[0], atol=1e-5)


def test_similarity_is_symmetric_bounded_and_one_for_identical(trained):
    a, b = PROBES, PROBES[::-1]
    ab, ba = trained.model.similarity_pairwise(a, b), trained.model.similarity_pairwise(b, a)
    np.testing.assert_allclose(ab, ba, atol=1e-6)
    assert ab.shape == (len(a),)
    assert np.all(np.abs(ab) <= 1 + 1e-6)
    np.testing.assert_allclose(trained.model.similarity_pairwise(PROBES, PROBES), 1.0, atol=1e-5)
    pairs = trained.val_pairs
    sims = trained.model.similarity_pairwise(pairs.text1, pairs.text2)
    assert np.all(np.abs(sims) <= 1 + 1e-6) and sims.std() > 0
    # the head is the dot product of the encodings
    np.testing.assert_allclose(ab, np.sum(trained.model.encode(a) * trained.model.encode(b), axis=1), atol=1e-6)


def test_similarity_needs_equal_lengths(trained):
    with pytest.raises(ValueError, match="a has 2 texts or vectors but b has 1"):
        trained.model.similarity_pairwise(["a", "b"], ["c"])


def test_predict_uses_threshold(trained):
    model = trained.model
    sims = model.similarity_pairwise(PROBES, PROBES[::-1])
    np.testing.assert_array_equal(model.predict(PROBES, PROBES[::-1]), sims > model.threshold)
    assert model.predict(PROBES, PROBES[::-1], threshold=1.0).sum() == 0
    assert model.predict(PROBES, PROBES[::-1], threshold=-1.0).all()
    with pytest.raises(ConfigError, match="must be a number in \\[-1, 1\\].*got 1.5"):
        model.predict(PROBES, PROBES[::-1], threshold=1.5)  # no score reaches it: a slip, not a choice


def test_unknown_head_is_rejected():
    model = small_model()
    with pytest.raises(ModelError, match="unknown head"):
        SiameseModel(model.vectorizer, model.encoder, ModelConfig(head="euclid"))


def test_build_is_seeded():
    a, b, c = small_model(seed=1), small_model(seed=1), small_model(seed=2)
    np.testing.assert_array_equal(a.encode(PROBES), b.encode(PROBES))
    assert not np.allclose(a.encode(PROBES), c.encode(PROBES))


# -- save / load ----------------------------------------------------------------------------------


def test_save_load_round_trip(trained, tmp_path):
    loaded = SiameseModel.load(trained.path)
    assert sorted(p.name for p in trained.path.iterdir()) == [
        "README.md",  # the model card
        "config.json",
        "history.png",
        "model.safetensors",
        "tokenizer.json",
    ]
    texts = PROBES + trained.val_pairs.text1[:50]
    np.testing.assert_allclose(loaded.encode(texts), trained.model.encode(texts), atol=1e-6)
    assert loaded.threshold == trained.model.threshold
    assert loaded.config == trained.model.config
    assert loaded.info["training"]["history"] == trained.model.info["training"]["history"]
    assert loaded.vectorizer.vocabulary() == trained.model.vectorizer.vocabulary()
    config = json.loads((trained.path / "config.json").read_text())
    assert config["format"] == siamese.models.siamese.FORMAT
    assert config["vocab_size"] == trained.model.vectorizer.vocab_size
    assert config["threshold"] == trained.model.threshold
    # save again from the loaded copy: identical weights and tokenizer on disk
    again = loaded.save(tmp_path / "again")
    assert files(again)["model.safetensors"] == files(trained.path)["model.safetensors"]
    assert files(again)["tokenizer.json"] == files(trained.path)["tokenizer.json"]


def test_loaded_model_encodes_in_eval_mode(trained):
    loaded = SiameseModel.load(trained.path)
    assert not loaded.encoder.training


@pytest.fixture
def saved(tmp_path) -> Path:
    return small_model().save(tmp_path / "model")


def test_load_missing_folder(tmp_path):
    with pytest.raises(ModelError, match="nowhere: no such folder"):  # was: "not a siamese model folder"
        SiameseModel.load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="empty: not a siamese model folder \\(no config.json\\)"):
        SiameseModel.load(tmp_path / "empty")


def test_load_missing_config(saved):
    (saved / "config.json").unlink()
    with pytest.raises(ModelError, match="not a siamese model folder"):
        SiameseModel.load(saved)


@pytest.mark.parametrize("missing", ["model.safetensors", "tokenizer.json"])
def test_load_missing_file(saved, missing):
    (saved / missing).unlink()
    with pytest.raises(ModelError, match=f"missing {missing}"):
        SiameseModel.load(saved)


def test_load_corrupted_config_json(saved):
    (saved / "config.json").write_text('{"format": "siamese-model/1", "dim": ')
    with pytest.raises(ModelError, match="invalid JSON"):
        SiameseModel.load(saved)


def test_load_wrong_format_tag(saved):
    config = json.loads((saved / "config.json").read_text())
    (saved / "config.json").write_text(json.dumps({**config, "format": "something-else/9"}))
    with pytest.raises(ModelError, match="unsupported model format"):
        SiameseModel.load(saved)


def test_load_weights_that_do_not_fit_the_config(saved):
    config = json.loads((saved / "config.json").read_text())
    (saved / "config.json").write_text(json.dumps({**config, "dim": config["dim"] * 2}))
    with pytest.raises(ModelError, match="weights do not fit the config"):
        SiameseModel.load(saved)


def test_load_corrupted_tokenizer(saved):
    (saved / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelError, match="not a readable tokenizer.json"):
        SiameseModel.load(saved)


def test_load_corrupted_weights(saved):
    (saved / "model.safetensors").write_bytes(b"definitely not safetensors" * 4)
    with pytest.raises(ModelError):
        SiameseModel.load(saved)


@pytest.mark.parametrize(
    "content",
    [b'{"format": "siamese-model/1"}', b"[]", b"\xff\xfe{}"],
    ids=["no-vocab-size", "not-an-object", "not-utf8"],
)
def test_load_malformed_config(saved, content):
    (saved / "config.json").write_bytes(content)
    with pytest.raises(ModelError):
        SiameseModel.load(saved)


# -- atomic save ----------------------------------------------------------------------------------


def failing_save_file(*args, **kwargs):
    raise OSError("disk full (simulated)")


def test_failed_save_leaves_no_folder(tmp_path, monkeypatch):
    model = small_model()
    monkeypatch.setattr(siamese.models.siamese, "save_file", failing_save_file)
    with pytest.raises(OSError, match="simulated"):
        model.save(tmp_path / "model")
    assert not (tmp_path / "model").exists()
    assert list(tmp_path.iterdir()) == []


def test_failed_save_keeps_the_previous_model(tmp_path, monkeypatch):
    old = small_model(seed=1)
    target = old.save(tmp_path / "model")
    before = files(target)
    monkeypatch.setattr(siamese.models.siamese, "save_file", failing_save_file)
    with pytest.raises(OSError, match="simulated"):
        small_model(seed=2).save(target)
    assert files(target) == before
    assert leftovers(tmp_path, "model") == []
    np.testing.assert_array_equal(SiameseModel.load(target).encode(PROBES), old.encode(PROBES))


def test_interrupted_save_cleans_up(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(siamese.models.siamese, "save_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        small_model().save(tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


def test_save_over_an_existing_model_replaces_it(tmp_path):
    target = small_model(seed=1).save(tmp_path / "model")
    new = small_model(seed=2)
    (target / "notes.txt").write_text("the user's, not ours")
    with pytest.raises(OutputError, match=r"files siamese did not write \(notes.txt\)"):
        new.save(target)  # replacing the folder would delete them
    assert (target / "notes.txt").read_text() == "the user's, not ours"
    assert new.save(target, overwrite=True) == target  # the user's consent
    assert sorted(os.listdir(target)) == ["README.md", "config.json", "model.safetensors", "tokenizer.json"]
    assert leftovers(tmp_path, "model") == []
    np.testing.assert_array_equal(SiameseModel.load(target).encode(PROBES), new.encode(PROBES))


def test_save_creates_parent_folders(tmp_path):
    target = small_model().save(tmp_path / "a" / "b" / "model")
    assert (target / "config.json").is_file()


def test_saved_folder_permissions_follow_umask(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    target = small_model().save(tmp_path / "model")
    assert target.stat().st_mode & 0o777 == 0o777 & ~umask
    for f in target.iterdir():
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask, f.name


def test_copied_folder_is_loadable(tmp_path, trained):
    # a copied folder is a complete model (nothing outside the folder is needed)
    copy = Path(shutil.copytree(trained.path, tmp_path / "copy"))
    np.testing.assert_allclose(SiameseModel.load(copy).encode(PROBES[:3]), trained.model.encode(PROBES[:3]), atol=1e-6)


def test_encoder_state_is_float32(trained):
    assert all(v.dtype == torch.float32 for v in trained.model.encoder.state_dict().values())
