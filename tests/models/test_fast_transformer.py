"""The fast transformer path: bf16 encoding on native-bf16 CPUs, and `siamese export --format onnx`
folders that every command opens like a PyTorch model folder (real MiniLM, real texts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import torch
from conftest import serving
from typer.testing import CliRunner

from siamese import ModelConfig, SiameseModel, datasets
from siamese.cli import app
from siamese.errors import ConfigError, ModelError
from siamese.search import DuplicateIndex

pytestmark = pytest.mark.slow  # MiniLM exported to ONNX, in fp32 and int8

os.environ["HF_HUB_OFFLINE"] = "1"
NATIVE_BF16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
cli = CliRunner()


def invoke(*args):
    return cli.invoke(app, [str(a) for a in args])


def ok_json(*args) -> dict:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout.strip().splitlines()[-1])


def refused(*args, fragment: str) -> str:
    """Exit code 2 and one `error: ...` line naming the problem, nothing on stdout."""
    result = invoke(*args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert result.stdout == ""
    return lines[0]


@pytest.fixture(scope="module")
def texts(data_dir) -> list[str]:
    """Real questions and sentences of different lengths: the Quora sample and STS-B test."""
    quora, sts = datasets.load("quora-sample", data_dir), datasets.load("sts-test", data_dir)
    return list(quora.text1[:60]) + list(quora.text2[:60]) + list(sts.text1[:40]) + list(sts.text2[:40])


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """all-MiniLM-L6-v2 as a saved siamese model folder (what users export)."""
    path = SiameseModel.build([], ModelConfig(encoder="transformer")).save(tmp_path_factory.mktemp("fast") / "minilm")
    return SiameseModel.load(path)


@pytest.fixture(scope="module")
def exported(minilm, tmp_path_factory):
    """The model exported once per module through the CLI, in fp32 and in int8."""
    root = tmp_path_factory.mktemp("exported")
    out = {}
    for quantize in (None, "int8"):
        folder = root / f"minilm-onnx-{quantize or 'fp32'}"
        result = ok_json(
            "export", minilm.path, "--format", "onnx", "--out", folder, *(["--quantize", quantize] if quantize else [])
        )
        assert result["quantize"] == quantize and result["min_cosine"] >= (0.98 if quantize else 0.999)
        if quantize:  # MiniLM's matmuls all quantise well: none is kept in fp32
            assert result["int8"]["kept_fp32"] == [] and result["int8"]["check_mean_cosine"] >= 0.99
        out[quantize or "fp32"] = folder
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1)


# -- bf16 ------------------------------------------------------------------------------------------


@pytest.mark.skipif(not NATIVE_BF16, reason="this CPU has no native bf16 (AVX512-BF16/AMX): encoding stays fp32")
def test_bf16_encoding_is_close_to_fp32_and_auto_picks_it(minilm, texts, monkeypatch):
    monkeypatch.delenv("SIAMESE_PRECISION", raising=False)
    assert minilm.encoding_precision() == "bf16"
    fp32, bf16 = minilm.encode(texts, precision="fp32"), minilm.encode(texts)
    assert bf16.dtype == np.float32
    assert cosines(fp32, bf16).min() >= 0.999
    assert not np.array_equal(fp32, bf16)  # really computed in bf16
    some = texts[:8]
    monkeypatch.setenv("SIAMESE_PRECISION", "fp32")  # forcing fp32 from any command
    np.testing.assert_array_equal(minilm.encode(some), minilm.encode(some, precision="fp32"))
    monkeypatch.delenv("SIAMESE_PRECISION")
    minilm.precision = "fp32"  # or per model (SiameseModel.load(folder, precision=...))
    try:
        np.testing.assert_array_equal(minilm.encode(some), minilm.encode(some, precision="fp32"))
    finally:
        minilm.precision = None


def test_precision_auto_is_fp32_without_native_bf16_and_for_word_encoders(minilm, monkeypatch):
    monkeypatch.delenv("SIAMESE_PRECISION", raising=False)
    monkeypatch.setattr("siamese.runtime.precision.native_bf16", lambda: False)  # an AVX2-only CPU
    assert minilm.encoding_precision() == "fp32"
    with pytest.raises(ConfigError, match="needs a CPU with native bfloat16"):
        minilm.encode(["a question"], precision="bf16")
    monkeypatch.undo()
    lstm = SiameseModel.build(["how do I learn python", "what is a siamese network"])
    assert lstm.encoding_precision() == "fp32"  # the word encoders keep fp32 vectors on every CPU
    monkeypatch.setenv("SIAMESE_PRECISION", "fp8")  # (fp16 is a precision now: CUDA's)
    with pytest.raises(ConfigError, match="SIAMESE_PRECISION must be one of"):
        minilm.encode(["a question"])


# -- ONNX export -----------------------------------------------------------------------------------


def test_exported_folders_give_the_pytorch_vectors(minilm, exported, texts):
    reference = minilm.encode(texts, precision="fp32")
    fp32 = SiameseModel.load(exported["fp32"])
    assert sorted(p.name for p in exported["fp32"].iterdir()) == ["config.json", "model.onnx", "tokenizer.json"]
    assert fp32.config.encoder == "onnx" and fp32.threshold == minilm.threshold and fp32.dim == 384
    assert cosines(fp32.encode(texts), reference).min() >= 0.999
    int8 = SiameseModel.load(exported["int8"])
    c = cosines(int8.encode(texts), reference)
    # int8 (dynamic, per channel): mean ~0.993 on the Quora sample + STS-B test, its worst text ~0.96
    assert c.mean() >= 0.98 and c.min() >= 0.95, (c.mean(), c.min())
    assert (exported["int8"] / "model.onnx").stat().st_size < 0.7 * (exported["fp32"] / "model.onnx").stat().st_size
    # batching must not change a text's vector (padding masked inside the graph)
    alone = np.concatenate([fp32.encode([t]) for t in texts[:3]])
    np.testing.assert_allclose(alone, fp32.encode(texts)[:3], atol=1e-5)
    # each folder is its own model: three fingerprints
    assert len({minilm.fingerprint(), fp32.fingerprint(), int8.fingerprint()}) == 3


def test_every_command_runs_on_an_exported_folder(minilm, exported, data_dir, tmp_path):
    folder = exported["int8"]
    quora = data_dir / "quora/quora_question_pairs_sample300.csv"
    report = ok_json("evaluate", folder, "--data", quora)
    assert report["n"] == 300 and report["roc_auc"] > 0.86  # all-MiniLM-L6-v2 as-is: 0.885 in fp32
    result = ok_json("predict", folder, "When will I see you?", "When can I see you again?")
    assert result["similarity"] > 0.7

    questions = read_questions(quora)[:80]
    corpus = tmp_path / "questions.txt"
    corpus.write_text("\n".join(questions[:60] + [questions[0]]) + "\n", encoding="utf-8")
    more = tmp_path / "more.txt"
    more.write_text("\n".join(questions[60:]) + "\n", encoding="utf-8")
    index = tmp_path / "idx"
    built = ok_json("index", "build", folder, "--data", corpus, "--out", index, "-q")
    assert (built["size"], built["skipped"]) == (60, 1)  # the repeated first question is indexed once
    assert ok_json("index", "add", index, "--data", more, "-q")["size"] == 80
    hits = ok_json("search", index, questions[5], "-k", "3")["hits"]
    # > 0.98, not ~1: int8 activations are quantised per batch, so a text's vector depends a
    # little on the texts it was encoded with
    assert hits[0]["text"] == questions[5] and hits[0]["similarity"] > 0.98
    run = tmp_path / "dedupe"
    summary = ok_json("dedupe", folder, "--data", corpus, "--out", run, "--threshold", "0.95", "-q")
    assert summary["clusters"] >= 1  # the repeated first question at least
    assert any(
        questions[0] in json.dumps(json.loads(line)) for line in (run / "clusters.jsonl").read_text().splitlines()
    )


def read_questions(path) -> list[str]:
    from siamese import read_pairs

    pairs = read_pairs(path)
    return list(dict.fromkeys(list(pairs.text1) + list(pairs.text2)))


def test_an_index_of_the_pytorch_model_is_refused_by_the_exported_one(minilm, exported, data_dir, tmp_path):
    index = DuplicateIndex(minilm)
    index.add(["How do I learn Python?", "What is the capital of France?"])
    index.save(tmp_path / "idx")
    line = refused(
        "search",
        tmp_path / "idx",
        "learn python",
        "--model",
        exported["fp32"],
        fragment="built by the PyTorch model this exported model came from",
    )
    assert "rebuild the index with the exported model" in line


def test_serve_an_exported_folder_over_http(exported):
    model = SiameseModel.load(exported["fp32"])
    pairs = [
        ["When will I see you?", "When can I see you again?"],
        ["Do they enjoy eating the dessert?", "Do they like hiking in the desert?"],
    ]
    with serving(exported["fp32"]) as base:
        request = urllib.request.Request(
            base + "/similarity",
            data=json.dumps({"pairs": pairs}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            body = json.loads(r.read())
        request = urllib.request.Request(
            base + "/v1/embeddings",
            data=json.dumps({"input": "hello there"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            embedding = json.loads(r.read())["data"][0]["embedding"]
    expected = model.similarity_pairwise([a for a, _ in pairs], [b for _, b in pairs])
    assert [r["similarity"] for r in body["results"]] == pytest.approx(expected.tolist(), abs=1e-5)
    assert len(embedding) == 384


# -- refusals --------------------------------------------------------------------------------------


def test_export_refusals_write_nothing(minilm, exported, tmp_path):
    out = tmp_path / "out"
    refused(
        "export", minilm.path, "--format", "torchscript", "--out", out, fragment="unknown export format 'torchscript'"
    )
    refused(
        "export",
        minilm.path,
        "--format",
        "tflite",
        "--quantize",
        "int8",
        "--out",
        out,
        fragment="unknown export format",
    )
    refused("export", minilm.path, "--quantize", "int4", "--out", out, fragment="unknown quantization 'int4'")
    refused("export", exported["fp32"], "--out", out, fragment="already an exported model")
    lstm = SiameseModel.build(["how do I learn python", "what is a siamese network"]).save(tmp_path / "lstm")
    refused("export", lstm, "--out", out, fragment="export supports the transformer encoder")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    from siamese.models.export import export_model

    concat = SiameseModel.build([], ModelConfig(encoder="transformer", head="concat", loss="bce"))
    with pytest.raises(ConfigError, match="export writes cosine-head models"):
        export_model(concat, out)
    assert not out.exists()


def test_training_an_exported_folder_is_refused(exported, data_dir, tmp_path):
    rows = (data_dir / "mqp/mqp.csv").read_text(encoding="utf-8").splitlines()[:9]
    (tmp_path / "pairs.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    common = ("train", "--data", tmp_path / "pairs.csv", "--out", tmp_path / "m", "--epochs", "1", "-q")
    refused(*common, "--encoder", "onnx", fragment="runs inference only")
    refused(*common, "--encoder", "transformer", "--transformer", exported["int8"], fragment="cannot be trained")
    assert not (tmp_path / "m").exists()


def test_a_damaged_graph_is_refused(exported, tmp_path):
    copy = shutil.copytree(exported["int8"], tmp_path / "copy")
    with open(copy / "model.onnx", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ModelError, match="does not match config.json"):
        SiameseModel.load(copy)


def test_import_siamese_stays_light():
    code = (
        "import sys, siamese; from siamese.models.siamese import SiameseModel; import siamese.cli; "
        "print(sorted(m for m in ('onnxruntime', 'onnx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_int8_weights_use_seven_bits_so_cpus_without_vnni_do_not_overflow(exported):
    """Without VNNI, ONNX Runtime adds int8 products in pairs into 16 bits: 8-bit weights can
    overflow there, so the export keeps every quantised weight within [-64, 64] (2 x 255 x 64 < 2^15)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(exported["int8"] / "model.onnx")).graph
    weights = [numpy_helper.to_array(t) for t in graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(weights) >= 36  # MiniLM: 6 layers x (Q, K, V, attention output, FFN in, FFN out)
    assert max(int(np.abs(w).max()) for w in weights) == 64  # the 7-bit range, all of it
    assert SiameseModel.load(exported["int8"]).info["export"]["int8"]["weight_bits"] == 7


def test_int8_keeps_the_matmuls_with_outliers_in_fp32_when_accuracy_needs_it(minilm, texts, tmp_path, monkeypatch):
    """all-mpnet-base-v2 needs this (quantised whole: mean cosine 0.88); MiniLM passes the default
    bar whole, so a stricter bar makes it keep its worst matmuls (the FFN down-projections) in fp32."""
    from siamese.models.export import export_model

    monkeypatch.setattr("siamese.models.export.MIN_MEAN_COSINE_INT8", 0.996)
    result = export_model(minilm, tmp_path / "strict", quantize="int8")
    kept = result["int8"]["kept_fp32"]
    assert kept and result["int8"]["check_mean_cosine"] >= 0.996
    assert "output/dense" in kept[0] and "attention" not in kept[0]  # GELU outputs feed the worst one
    strict = SiameseModel.load(tmp_path / "strict")
    assert strict.info["export"]["int8"]["kept_fp32"] == kept
    reference = minilm.encode(texts, precision="fp32")
    assert cosines(strict.encode(texts), reference).mean() >= 0.99


# -- the three feature branches together: ST layout, calibration, ONNX export, encode ---------------


def test_a_calibrated_transformer_keeps_its_layout_and_calibration_through_export(minilm, data_dir, tmp_path):
    quora = data_dir / "quora/quora_question_pairs_sample300.csv"
    source = tmp_path / "minilm"
    shutil.copytree(minilm.path, source)
    # calibrate rewrites config.json alone (save_fitted) in a sentence-transformers layout folder
    summary = ok_json("calibrate", source, "--data", quora)
    assert (source / "0_Transformer" / "model.safetensors").is_file() and (source / "modules.json").is_file()
    calibrated = SiameseModel.load(source)
    assert calibrated.calibrator is not None and calibrated.calibrator.method == summary["method"]
    assert calibrated.fingerprint() == minilm.fingerprint()  # calibrating is not part of the architecture
    # save writes the layout and keeps the calibration
    again = SiameseModel.load(calibrated.save(tmp_path / "again"))
    assert (tmp_path / "again" / "0_Transformer" / "model.safetensors").is_file()
    assert again.calibrator.to_dict() == calibrated.calibrator.to_dict()

    onnx = tmp_path / "onnx"
    ok_json("export", source, "--format", "onnx", "--out", onnx)
    exported = SiameseModel.load(onnx)
    assert exported.calibrator is not None and exported.calibrator.to_dict() == calibrated.calibrator.to_dict()
    pair = ["When will I see you?", "When can I see you again?"]
    result = ok_json("predict", onnx, *pair)
    assert result["probability"] == pytest.approx(float(calibrated.calibrator([result["similarity"]])[0]))
    with serving(onnx) as base:
        request = urllib.request.Request(
            base + "/similarity",
            data=json.dumps({"pairs": [pair]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            assert json.loads(r.read())["results"][0]["probability"] == pytest.approx(result["probability"], abs=1e-5)

    # calibrate (save_fitted) on the exported folder: config.json rewritten, the graph untouched and still accepted
    graph = (onnx / "model.onnx").read_bytes()
    ok_json("calibrate", onnx, "--data", quora, "--method", "platt")
    assert (onnx / "model.onnx").read_bytes() == graph
    recalibrated = SiameseModel.load(onnx)
    assert recalibrated.calibrator.method == "platt" and recalibrated.fingerprint() == exported.fingerprint()

    # encode (pretrained branch) on an exported folder: the graph's vectors
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(pair) + "\n", encoding="utf-8")
    out = ok_json("encode", onnx, "--data", texts, "--out", tmp_path / "v.npy", "-q")
    assert out["n"] == 2 and out["dim"] == 384
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), exported.encode(pair), atol=1e-5)
