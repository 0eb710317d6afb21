"""`siamese pretrained` (a pretrained encoder as an untrained Siamese model, threshold chosen on
validation pairs), sentence-transformers compatibility both ways, and `siamese encode`.

Real components throughout: MiniLM from its PyPI package, mpnet from its parts (make mpnet), the
installed sentence-transformers, and pairs from the shared data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from siamese import ModelConfig, SiameseModel, datasets, read_pairs
from siamese.cli import app
from siamese.evaluation.metrics import choose_threshold
from siamese.models.encoders import default_model_path

os.environ["HF_HUB_OFFLINE"] = "1"
SCRIPT = Path(sys.executable).parent / "siamese"
LONG = "How do siamese networks share their weights between the two branches? " * 40  # > 256 tokens: truncated
TEXTS = ["When will I see you?", "When can I see you again?", "Do they enjoy eating the dessert?", LONG]
ST_LAYOUT = {
    "README.md",  # the model card
    "config.json",
    "tokenizer.json",
    "model.safetensors",
    "modules.json",
    "config_sentence_transformers.json",
    "0_Transformer/config.json",
    "0_Transformer/model.safetensors",
    "0_Transformer/tokenizer.json",
    "0_Transformer/tokenizer_config.json",
    "0_Transformer/sentence_bert_config.json",
    "1_Pooling/config.json",
}


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def cli_json(*args) -> dict:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_user_error(result, *fragments: str) -> str:
    """Exit code 2, one line on stderr, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def sentence_transformer(folder: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")


def assert_same_vectors(a: np.ndarray, b: np.ndarray) -> None:
    """Row-wise cosine >= 0.9999 (sentence-transformers without Normalize gives unnormalised rows)."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    assert a.shape == b.shape and (a * b).sum(1).min() >= 0.9999, (a * b).sum(1)


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def val_csv(data_dir, tmp_path_factory) -> Path:
    """40 real labelled pairs (MQP, both labels) as a CSV file."""
    rows = (data_dir / "mqp/mqp.csv").read_text(encoding="utf-8").splitlines()[:41]
    path = tmp_path_factory.mktemp("val") / "mqp40.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def minilm_out(val_csv, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("pretrained") / "minilm"
    return out, cli_json("pretrained", "minilm", "--out", out, "--val-data", val_csv)


# -- siamese pretrained ----------------------------------------------------------------------------


def test_pretrained_minilm_chooses_its_threshold_on_the_validation_pairs(minilm_out, val_csv):
    out, result = minilm_out
    model = SiameseModel.load(out)
    val = read_pairs(val_csv)
    expected, choice = choose_threshold(model.similarity_pairwise(val.text1, val.text2), val.labels)
    assert result["threshold"] == model.threshold == pytest.approx(expected, abs=1e-6)
    assert result["threshold_value"] == pytest.approx(choice["value"]) and result["val_pairs"] == len(val) == 40
    assert (model.config.encoder, model.config.head, model.config.encoder_options["pooling"]) == (
        "transformer",
        "cosine",
        "mean",
    )
    assert model.config.max_length == result["max_length"] == 256  # MiniLM's sentence_bert_config.json
    info = model.info["pretrained"]
    assert info["name"] == "minilm" and info["folder"] == str(default_model_path().resolve())
    assert info["modules"] == ["Transformer", "Pooling", "Normalize"]
    assert info["threshold_choice"]["chosen_on"] == result["chosen_on"] == [str(val_csv)]
    # The package's folder is itself a sentence-transformers folder: the same vectors as ST gives.
    assert_same_vectors(model.encode(TEXTS), sentence_transformer(default_model_path()).encode(TEXTS))


def test_sentence_transformers_loads_our_folder_and_the_weights_are_stored_once(minilm_out):
    out, _ = minilm_out
    assert files(out) == ST_LAYOUT
    assert (
        load_file(str(out / "model.safetensors")) == {}
    )  # cosine head: no weights of its own; the encoder's are in 0_Transformer
    ours = SiameseModel.load(out)
    st = sentence_transformer(out)
    assert st.similarity_fn_name == "cosine" and st.get_max_seq_length() == 256
    assert_same_vectors(st.encode(TEXTS), ours.encode(TEXTS))
    np.testing.assert_allclose(np.linalg.norm(st.encode(TEXTS), axis=1), 1, atol=1e-5)  # Normalize is in modules.json


def test_transformer_folders_of_the_old_layout_load_with_the_same_fingerprint(minilm_out, tmp_path):
    """Before the layout the encoder's weights sat in the root's model.safetensors under our names:
    such folders still load, to the same vectors and fingerprint, and are re-saved in the new layout."""
    out, _ = minilm_out
    model = SiameseModel.load(out)
    old = tmp_path / "old"
    old.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (old / name).write_bytes((out / name).read_bytes())
    save_file(model.state_dict(), str(old / "model.safetensors"), metadata={"format": "siamese-model/1"})
    assert any(k.startswith("model.encoder.layer.") for k in load_file(str(old / "model.safetensors")))
    loaded = SiameseModel.load(old)
    assert loaded.fingerprint() == model.fingerprint()
    np.testing.assert_allclose(loaded.encode(TEXTS[:2]), model.encode(TEXTS[:2]), atol=1e-6)
    assert files(loaded.save(tmp_path / "resaved")) == ST_LAYOUT
    # The weights must fit: a damaged 0_Transformer/model.safetensors is a one-line error.
    save_file(
        {"embeddings.word_embeddings.weight": torch.zeros(3, 3)},
        str(tmp_path / "resaved/0_Transformer/model.safetensors"),
    )
    with pytest.raises(Exception, match=r"0_Transformer/model.safetensors: weights do not fit the config"):
        SiameseModel.load(tmp_path / "resaved")


def test_a_sentence_transformers_folder_with_cls_pooling(val_csv, tmp_path):
    """A folder written by sentence-transformers itself (its current Pooling config, Transformer at
    the root, max_seq_length 64), read by `pretrained`: its vectors; and ST reads ours back."""
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Pooling, Transformer
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(
        modules=[Transformer(str(default_model_path()), max_seq_length=64), Pooling(384, "cls")], device="cpu"
    )
    st.save(str(tmp_path / "st-cls"))
    result = cli_json("pretrained", tmp_path / "st-cls", "--out", tmp_path / "ours", "--val-data", val_csv)
    assert (result["pooling"], result["max_length"]) == ("cls", 64)
    ours = SiameseModel.load(tmp_path / "ours")
    expected = st.encode(TEXTS)
    assert_same_vectors(ours.encode(TEXTS), expected)
    assert_same_vectors(sentence_transformer(tmp_path / "ours").encode(TEXTS), expected)


@pytest.fixture
def tiny_roberta(tmp_path, wordpiece) -> Path:
    """A plain Hugging Face folder: a random 16-wide RoBERTa whose padding id is 1."""
    from transformers import RobertaConfig, RobertaModel

    folder = tmp_path / "tiny-roberta"
    folder.mkdir()
    wordpiece(folder)
    # Its tokenizer.json is WordPiece, not RoBERTa's BPE: say so, as a real folder's tokenizer_config.json
    # would (else transformers rebuilds RoBERTa's tokenizer for sentence-transformers' reference).
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    torch.manual_seed(0)
    RobertaModel(
        RobertaConfig(
            vocab_size=11,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=40,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        )
    ).save_pretrained(folder)
    return folder


def test_a_plain_hugging_face_folder_whose_pad_id_is_1(val_csv, tmp_path, tiny_roberta):
    """A RoBERTa-like folder without modules.json: mean pooling (as sentence-transformers does for
    one), padding with its own id 1, and sentence-transformers reads the result."""
    folder = tiny_roberta
    # --max-length: its 40 positions (38 usable: RoBERTa counts from pad + 1) hold fewer than the default 128 tokens
    result = cli_json("pretrained", folder, "--out", tmp_path / "ours", "--val-data", val_csv, "--max-length", 32)
    assert (result["pooling"], result["max_length"], result["dim"]) == ("mean", 32, 16)
    ours = SiameseModel.load(tmp_path / "ours")
    assert ours.vectorizer.pad_id == 1 and ours.info["pretrained"]["modules"] is None
    texts = ["hello world", "how are you worlds hello", "you"]  # different lengths: padding matters
    expected = sentence_transformer(folder).encode(texts)
    assert_same_vectors(ours.encode(texts), expected)
    assert_same_vectors(sentence_transformer(tmp_path / "ours").encode(texts), expected)


def test_other_heads_and_poolings_in_the_layout(tiny_roberta, tmp_path):
    """[CLS] with a classifier head: raw features (no Normalize), the head's weights at the root,
    the same vectors from sentence-transformers. HF's pooler output has no sentence-transformers
    Pooling: 0_Transformer/ holds the weights, but there is no modules.json."""
    texts = ["hello world", "how are you worlds hello", "you"]
    options = {"path": str(tiny_roberta), "pooling": "cls"}
    concat = SiameseModel.build(
        [], ModelConfig(encoder="transformer", head="concat", loss="bce", encoder_options=options)
    )
    path = concat.save(tmp_path / "concat")
    assert set(load_file(str(path / "model.safetensors"))) == {"head.dense.weight", "head.dense.bias"}
    assert [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())] == [
        "Transformer",
        "Pooling",
    ]
    assert not (path / "config_sentence_transformers.json").exists()
    st = sentence_transformer(path)
    np.testing.assert_allclose(
        st.encode(texts), concat.encode(texts), atol=1e-5
    )  # raw [CLS] features, not unit vectors
    loaded = SiameseModel.load(path)
    assert loaded.fingerprint() == concat.fingerprint()
    np.testing.assert_allclose(
        loaded.similarity_pairwise(texts, texts[::-1]), concat.similarity_pairwise(texts, texts[::-1]), atol=1e-6
    )

    pooler = SiameseModel.build(
        [], ModelConfig(encoder="transformer", encoder_options={**options, "pooling": "pooler"})
    )
    path = pooler.save(tmp_path / "pooler")
    assert (path / "0_Transformer/model.safetensors").is_file() and not (path / "modules.json").exists()
    np.testing.assert_allclose(SiameseModel.load(path).encode(texts), pooler.encode(texts), atol=1e-6)


def test_pretrained_mpnet_by_name(val_csv, tmp_path):
    """all-mpnet-base-v2 (make mpnet): 384 tokens from its config, MPNet's padding id 1, and
    sentence-transformers gives the same vectors from our folder."""
    result = cli_json("pretrained", "mpnet", "--out", tmp_path / "mpnet", "--val-data", val_csv)
    assert (result["dim"], result["max_length"], result["pooling"]) == (768, 384, "mean")
    ours = SiameseModel.load(tmp_path / "mpnet")
    assert ours.vectorizer.pad_id == 1
    assert_same_vectors(sentence_transformer(tmp_path / "mpnet").encode(TEXTS), ours.encode(TEXTS))


def test_default_validation_sets_are_the_shared_ones(data_dir, tmp_path, monkeypatch):
    """Without --val-data the threshold is chosen on datasets.VALIDATION (here cut to 30 real MSRP
    pairs); without the shared data folder that is a one-line error and nothing is written."""
    root = tmp_path / "data"
    (root / "msrp").mkdir(parents=True)
    rows = (data_dir / "msrp/msr-para-val.tsv").read_text(encoding="utf-8").splitlines()[:31]
    (root / "msrp/msr-para-val.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(datasets, "VALIDATION", ["msrp-val"])
    monkeypatch.setenv("SIAMESE_DATA", str(root))
    result = cli_json("pretrained", "minilm", "--out", tmp_path / "m")
    assert result["chosen_on"] == ["msrp-val"] and result["val_pairs"] == 30
    monkeypatch.setenv("SIAMESE_DATA", str(tmp_path / "absent"))
    assert_user_error(cli("pretrained", "minilm", "--out", tmp_path / "n"), "no shared data folder", "--val-data")
    assert not (tmp_path / "n").exists()


def test_bad_sources_are_one_line_errors_and_nothing_is_written(val_csv, tmp_path):
    def refused(source, *fragments, val=val_csv):
        out = tmp_path / "out"
        assert_user_error(cli("pretrained", source, "--out", out, "--val-data", val), *fragments)
        assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]

    refused(tmp_path / "missing", "missing: no such folder")
    (tmp_path / "empty").mkdir()
    refused(tmp_path / "empty", "not a sentence-transformers or Hugging Face model folder (no config.json)")
    st = tmp_path / "st"
    (st / "1_Pooling").mkdir(parents=True)
    (st / "config.json").write_text('{"model_type": "bert"}')
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (st / "modules.json").write_text(
        json.dumps(modules + [{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    )
    (st / "1_Pooling/config.json").write_text('{"pooling_mode": "mean"}')
    refused(st, "module 'Dense' is not supported")
    (st / "modules.json").write_text(json.dumps(modules))
    (st / "1_Pooling/config.json").write_text('{"pooling_mode": "max"}')
    refused(st, "pooling max is not supported (mean or cls)")
    (st / "1_Pooling/config.json").write_text('{"pooling_mode": "mean"}')
    (st / "sentence_bert_config.json").write_text('{"max_seq_length": 128, "do_lower_case": true}')
    refused(st, "do_lower_case")
    SiameseModel.build(["a b"], ModelConfig(encoder="bow", dim=4)).save(tmp_path / "siamese")
    refused(tmp_path / "siamese", "already a Siamese model folder")
    positives = tmp_path / "positives.csv"
    positives.write_text("question1,question2,is_duplicate\nhow old are you,what is your age,1\n")
    refused("minilm", "need both duplicates and non-duplicates", val=positives)
    refused("minilm", "no such file", val=tmp_path / "nope.csv")


# -- siamese encode --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def word_models(val_csv, tmp_path_factory) -> dict[str, Path]:
    """Untrained word models (built on real texts) of three kinds: lstm and bow (cosine), bow with
    the manhattan head (raw features)."""
    pairs = read_pairs(val_csv)
    root = tmp_path_factory.mktemp("word-models")
    configs = {
        "lstm": ModelConfig(dim=16),
        "bow": ModelConfig(encoder="bow", dim=16),
        "bow-manhattan": ModelConfig(encoder="bow", head="manhattan", dim=16),
    }
    return {
        name: SiameseModel.build(pairs.text1 + pairs.text2, config).save(root / name)
        for name, config in configs.items()
    }


@pytest.fixture
def texts_file(val_csv, tmp_path) -> tuple[Path, list[str]]:
    texts = read_pairs(val_csv).text1[:12]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path, texts


@pytest.mark.parametrize("kind", ["lstm", "bow", "bow-manhattan"])
def test_encode_writes_the_models_vectors_in_file_order(word_models, texts_file, kind, tmp_path):
    path, texts = texts_file
    out = tmp_path / "vectors" / "v.npy"
    result = cli_json("encode", word_models[kind], "--data", path, "--out", out, "--batch-size", 5)
    assert set(result) == {"n", "dim", "seconds", "texts_per_second", "out"}
    assert (result["n"], result["dim"], result["out"]) == (12, 16, str(out)) and result["texts_per_second"] > 0
    vectors = np.load(out)
    assert vectors.dtype == np.float32 and vectors.shape == (12, 16)
    model = SiameseModel.load(word_models[kind])
    np.testing.assert_allclose(vectors, model.encode(texts), atol=1e-6)
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms, 1, atol=1e-5) == (kind != "bow-manhattan")  # raw features for the manhattan head
    assert os.listdir(out.parent) == ["v.npy"]  # no temporary file left


def test_encode_a_csv_column_with_the_transformer(minilm_out, val_csv, tmp_path):
    out, _ = minilm_out
    result = cli_json("encode", out, "--data", val_csv, "--column", "question_2", "--out", tmp_path / "q2.npy")
    pairs = read_pairs(val_csv)
    assert (result["n"], result["dim"]) == (40, 384)
    np.testing.assert_allclose(np.load(tmp_path / "q2.npy"), SiameseModel.load(out).encode(pairs.text2), atol=1e-5)


def test_encode_errors_are_one_line_and_write_nothing(word_models, texts_file, tmp_path):
    model = word_models["bow"]
    path, _ = texts_file
    blank = tmp_path / "blank.txt"
    blank.write_text("first text\n\nthird text\n", encoding="utf-8")
    assert_user_error(cli("encode", model, "--data", blank, "--out", tmp_path / "a.npy"), "blank.txt:2: empty line")
    table = tmp_path / "table.csv"
    table.write_text("id,question\n1,how old are you\n2,\n", encoding="utf-8")
    assert_user_error(
        cli("encode", model, "--data", table, "--column", "title", "--out", tmp_path / "a.npy"),
        "table.csv: no column 'title'",
    )
    assert_user_error(
        cli("encode", model, "--data", table, "--column", "question", "--out", tmp_path / "a.npy"),
        "table.csv:3: column 'question': empty text",
    )
    (tmp_path / "folder").mkdir()
    assert_user_error(cli("encode", model, "--data", path, "--out", tmp_path / "folder"), "is a folder")
    assert_user_error(cli("encode", model, "--data", path, "--out", path / "v.npy"), "is a file, not a folder")
    assert_user_error(cli("encode", tmp_path / "no-model", "--data", path, "--out", tmp_path / "a.npy"), "no-model")
    assert not (tmp_path / "a.npy").exists() and os.listdir(tmp_path / "folder") == []


def test_the_python_api_encodes_a_file_as_the_command_does_and_keeps_what_is_there(word_models, texts_file, tmp_path):
    from siamese import encode_to_file, write_vectors
    from siamese.errors import OutputError
    from siamese.search.files import encode_files

    path, texts = texts_file
    cli_json("encode", word_models["bow"], "--data", path, "--out", tmp_path / "cli.npy")
    report = encode_files(word_models["bow"], path, tmp_path / "py.npy", progress=False)
    assert report.result["n"] == 12 and report.lines[0].startswith("encoded 12 texts into 16-d vectors")
    np.testing.assert_array_equal(np.load(tmp_path / "py.npy"), np.load(tmp_path / "cli.npy"))
    kept = (tmp_path / "py.npy").read_bytes()
    model = SiameseModel.load(word_models["bow"])
    for write in (
        lambda: encode_files(word_models["bow"], path, tmp_path / "py.npy", progress=False),
        lambda: encode_to_file(model, texts[:2], tmp_path / "py.npy"),
        lambda: write_vectors(tmp_path / "py.npy", np.zeros((2, 3))),
    ):
        with pytest.raises(OutputError, match="overwrite=True in Python"):
            write()
    with pytest.raises(OutputError, match="this command reads|input"):
        encode_files(word_models["bow"], path, path, overwrite=True, progress=False)  # an input is never an output
    assert (tmp_path / "py.npy").read_bytes() == kept and path.read_text(encoding="utf-8").count("\n") == 12
    assert encode_to_file(model, texts[:2], tmp_path / "py.npy", overwrite=True)["n"] == 2
    assert np.load(tmp_path / "py.npy").shape == (2, 16)


def test_encode_from_the_installed_command(word_models, texts_file, tmp_path):
    """The console script, as a user runs it: only the JSON on stdout."""
    path, texts = texts_file
    proc = subprocess.run(
        [
            str(SCRIPT),
            "encode",
            str(word_models["lstm"]),
            "--data",
            str(path),
            "--out",
            str(tmp_path / "v.npy"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n"] == len(texts) == np.load(tmp_path / "v.npy").shape[0]
