"""The ``siamese`` commands on real data. Most run in this process (conftest.invoke: what the
command prints and returns, without a subprocess's start-up); a few smoke tests run the installed
console script as a user would: --help, train then predict, a user error's exit code 2, a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from conftest import SCRIPT, assert_user_error, invoke, run, run_json, script

from siamese import SiameseModel, datasets
from siamese.evaluation.metrics import evaluate

EVAL_KEYS = {
    "accuracy",
    "precision",
    "recall",
    "f1",
    "roc_auc",
    "average_precision",
    "threshold",
    "confusion_matrix",
    "n",
    "brier",
    "ece",
    "log_loss",
    "calibrated",
}


@pytest.mark.slow  # subprocesses
def test_installed_script_and_python_m_show_every_command():
    for command in ([str(SCRIPT)], [sys.executable, "-m", "siamese"]):
        proc = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        for name in (
            "train",
            "evaluate",
            "predict",
            "encode",
            "index",
            "search",
            "dedupe",
            "serve",
            "distill",
            "emoji",
        ):
            assert f" {name} " in proc.stdout, (name, proc.stdout)
    # a usage mistake is one line starting with error:, as every other mistake (it was a box of five lines)
    for args, fragment in [
        (["train", "--no-such-option"], "siamese train: No such option: --no-such-option"),
        (["dedupe", "m", "--data", "q.csv", "--out", "o", "--threshold", "90"], "90 % is 0.9"),
        (["search", "idx", "a question", "-k", "0"], "'-k'"),
        (["index", "add"], "siamese index add: Missing argument"),
    ]:
        usage = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
        assert usage.returncode == 2 and usage.stdout == "", (args, usage.stderr)
        assert usage.stderr.startswith("error: ") and usage.stderr.count("\n") == 1 and fragment in usage.stderr
    bare = subprocess.run([str(SCRIPT), "index"], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and "Usage: siamese index" in bare.stdout + bare.stderr  # the help, as asked


@pytest.mark.slow  # subprocesses
def test_installed_script_trains_then_predicts(data_dir, tmp_path):
    """The smoke test of the console script: a small training (MSRP val: 346 duplicates), then a verdict."""
    out = tmp_path / "model"
    trained = run_json(
        "train",
        "--data",
        data_dir / "msrp/msr-para-val.tsv",
        "--out",
        out,
        "--epochs",
        1,
        "--dim",
        16,
        "--quiet",
        run=script,
    )
    assert trained["epochs"] == 1 and trained["out"] == str(out) and trained["train_pairs"] == 346 - 35
    a, b = "When will I see you?", "When can I see you again?"
    result = run_json("predict", out, a, b, run=script)
    model = SiameseModel.load(out)
    assert result["similarity"] == pytest.approx(float(model.similarity_pairwise([a], [b])[0]), abs=1e-6)
    assert result["threshold"] == trained["threshold"] == model.threshold
    assert result["duplicate"] == (result["similarity"] > result["threshold"])


@pytest.fixture(scope="module")
def cli_model(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "model"
    result = run_json(
        "train",
        "--data",
        data_dir / "msrp/msr-para-train.tsv",
        "--val-data",
        data_dir / "msrp/msr-para-val.tsv",
        "--out",
        out,
        "--epochs",
        1,
        "--dim",
        32,
        "--quiet",
    )
    return out, result


def test_train_writes_model_and_reports_json(cli_model):
    out, result = cli_model
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",  # the model card
        "config.json",
        "history.png",
        "model.safetensors",
        "tokenizer.json",
    ]
    assert {"pairs_per_second", "seconds", "epochs", "val_loss", "threshold"} <= set(result)
    assert result["epochs"] == 1
    assert result["calibration"]["fitted"] is True
    assert result["pairs_per_second"] > 0 and result["seconds"] > 0
    assert isinstance(result["val_loss"], float) and result["val_loss"] > 0
    assert result["train_pairs"] == 2407 and result["val_pairs"] == 500  # MSRP train duplicates / val pairs
    assert result["out"] == str(out)
    model = SiameseModel.load(out)
    assert model.threshold == result["threshold"]
    assert model.config.dim == 32


def test_evaluate_json(cli_model, data_dir):
    out, trained = cli_model
    report = run_json("evaluate", out, "--data", data_dir / "msrp/msr-para-test.tsv")
    assert EVAL_KEYS <= set(report)
    assert report["n"] == 1725
    cm = np.array(report["confusion_matrix"])
    assert cm.shape == (2, 2) and cm.sum() == report["n"]
    assert cm[1].sum() == 1147  # documented MSRP test positives
    assert report["threshold"] == trained["threshold"]
    assert report["accuracy"] == pytest.approx((cm[0, 0] + cm[1, 1]) / report["n"])
    assert report["roc_auc"] > 0.5
    # the same numbers as the Python API
    expected = evaluate(SiameseModel.load(out), datasets.load("msrp-test", data_dir))
    for key in ("accuracy", "f1", "roc_auc", "average_precision"):
        assert report[key] == pytest.approx(expected[key], abs=1e-6)
    assert report["confusion_matrix"] == expected["confusion_matrix"]


def test_evaluate_threshold_override(cli_model, data_dir):
    out, _ = cli_model
    report = run_json("evaluate", out, "--data", data_dir / "msrp/msr-para-val.tsv", "--threshold=-1")
    assert report["threshold"] == -1.0
    assert report["confusion_matrix"] == [[0, 500 - 346], [0, 346]]  # every pair predicted duplicate
    assert report["recall"] == 1.0 and report["precision"] == pytest.approx(346 / 500)


def test_evaluate_sts_reports_correlations(cli_model, data_dir):
    out, _ = cli_model
    report = run_json("evaluate", out, "--data", data_dir / "stsbenchmark/sts-test.csv")
    assert report["n"] == 1379
    assert -100 <= report["spearman"] <= 100 and -100 <= report["pearson"] <= 100
    expected = evaluate(SiameseModel.load(out), datasets.load("sts-test", data_dir))
    assert report["spearman"] == pytest.approx(expected["spearman"], abs=1e-4)
    assert report["spearman"] > 0  # paraphrase training ranks graded similarity the right way round


def test_predict_json(cli_model):
    out, trained = cli_model
    a, b = "When will I see you?", "When can I see you again?"
    result = run_json("predict", out, a, b)
    assert set(result) == {"similarity", "probability", "duplicate", "threshold"}
    # train calibrates on its validation pairs by default: the probability is the stored calibrator's
    assert result["probability"] == pytest.approx(float(SiameseModel.load(out).probability([a], [b])[0]), abs=1e-6)
    assert result["threshold"] == trained["threshold"]
    assert result["duplicate"] == (result["similarity"] > result["threshold"])
    assert result["similarity"] == pytest.approx(
        float(SiameseModel.load(out).similarity_pairwise([a], [b])[0]), abs=1e-6
    )
    # --threshold overrides the model's: pick one that flips the verdict
    flipped = run_json("predict", out, a, b, "--threshold", "1" if result["duplicate"] else "-1")
    assert flipped["duplicate"] is not result["duplicate"]
    assert flipped["similarity"] == result["similarity"]


@pytest.mark.slow  # the installed script, in a subprocess
def test_train_bad_data_fails_cleanly(tmp_path):
    bad = tmp_path / "pairs.csv"
    bad.write_text("id,first,second,same\n1,a b,a c,1\n2,d e,f g,0\n3,h i,j k,2\n4,l m,n o,1\n")
    out = tmp_path / "model"
    proc = script(
        "train",
        "--data",
        bad,
        "--out",
        out,
        "--text1",
        "first",
        "--text2",
        "second",
        "--label",
        "same",
        "--epochs",
        1,
        "--quiet",
        check_ok=False,
    )  # exit code 2 from the real script
    line = assert_user_error(proc, f"{bad}:4", "column 'same'", "'2'")
    assert line == f"error: {bad}:4: column 'same': label must be 0/1, true/false or yes/no, got '2'"
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.csv"]


def test_train_bad_validation_data_fails_before_training(tmp_path, data_dir):
    val = tmp_path / "val.csv"
    val.write_bytes(b"text1,text2,label\nfine,text,1\nalso fine,ok,0\nbad \xff byte,x,1\n")
    out = tmp_path / "model"
    proc = run(
        "train",
        "--data",
        data_dir / "msrp/msr-para-val.tsv",
        "--val-data",
        val,
        "--out",
        out,
        "--quiet",
        check_ok=False,
    )
    assert_user_error(proc, f"{val}:4", "not valid UTF-8 (byte 0xff)")
    assert not out.exists()


def test_evaluate_missing_model_folder(tmp_path, data_dir):
    proc = run("evaluate", tmp_path / "no-model", "--data", data_dir / "msrp/msr-para-val.tsv", check_ok=False)
    assert_user_error(proc, str(tmp_path / "no-model"), "no such folder")


def test_train_with_split_test_fraction_reports_held_out_metrics(tmp_path, data_dir):
    # MQP: 3,048 pairs, half duplicates. 20 % test and 10 % of the rest for validation, both labels kept.
    out = tmp_path / "mqp-model"
    result = run_json(
        "train",
        "--data",
        data_dir / "mqp/mqp.csv",
        "--out",
        out,
        "--epochs",
        1,
        "--dim",
        32,
        "--test-fraction",
        0.2,
        "--quiet",
    )
    test = result["test"]
    assert EVAL_KEYS <= set(test)
    assert test["n"] == round(0.2 * 1524) * 2  # stratified: 305 of each label
    assert np.array(test["confusion_matrix"]).sum(axis=1).tolist() == [305, 305]
    assert result["val_pairs"] == round(0.1 * 1219) * 2
    assert result["train_pairs"] == 1524 - 305 - 122  # duplicates left for training
    assert test["threshold"] == result["threshold"]


def test_train_rejects_unknown_precision_before_writing(tmp_path, data_dir):
    out = tmp_path / "model"
    proc = run(
        "train",
        "--data",
        data_dir / "msrp/msr-para-val.tsv",
        "--out",
        out,
        "--precision",
        "fp16",
        "--quiet",
        check_ok=False,
    )
    assert_user_error(proc, "precision", "'fp16'")
    assert not out.exists()


def test_train_json_without_quiet_keeps_stdout_pure_and_logs_one_line_per_epoch(tmp_path, data_dir):
    # Was: epoch lines on stdout before the JSON, and tqdm's \r redraws flooding a non-terminal stderr.
    proc = run(
        "train",
        "--data",
        data_dir / "msrp/msr-para-val.tsv",
        "--out",
        tmp_path / "m",
        "--epochs",
        2,
        "--dim",
        16,
        "--json",
    )
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["epochs"] == 2, proc.stdout
    assert "\r" not in proc.stderr
    epoch_lines = [line for line in proc.stderr.splitlines() if line.startswith("epoch=")]
    assert len(epoch_lines) == 2, proc.stderr


def test_train_killed_midway_resumes_and_ends_as_the_uninterrupted_run(tmp_path, data_dir):
    ck = tmp_path / "ck"
    args = [
        "train",
        "--data",
        data_dir / "msrp/msr-para-train.tsv",
        "--val-data",
        data_dir / "msrp/msr-para-val.tsv",
        "--epochs",
        3,
        "--dim",
        32,
        "--seed",
        1,
        "--workers",
        1,
        "--precision",
        "fp32",
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [str(SCRIPT), *map(str, args), "--out", tmp_path / "m", "--checkpoint", ck],  # to SIGKILL it
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while not (ck / "trainer_state.json").exists():  # the first epoch's checkpoint
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reached = json.loads((ck / "trainer_state.json").read_text())["trainer"]["epoch"]
    assert 1 <= reached < 3 and not (tmp_path / "m").exists()

    resumed = run_json("train", "--resume", ck)  # its options come from the checkpoint
    assert resumed["epochs"] == 3 and resumed["out"] == str(tmp_path / "m")
    whole = run_json(*args, "--out", tmp_path / "whole")
    a, b = SiameseModel.load(tmp_path / "m"), SiameseModel.load(tmp_path / "whole")
    for k, v in b.state_dict().items():
        assert torch.equal(a.state_dict()[k], v), k
    assert a.threshold == b.threshold and resumed["best_epoch"] == whole["best_epoch"]
    assert_user_error(run("train", "--resume", tmp_path / "whole", check_ok=False), "not a training checkpoint")


def test_a_corpus_csv_without_column_uses_its_text_column_or_refuses_listing_the_columns(
    small_calibrated, data_dir, tmp_path
):
    """InsuranceQA's questions.csv starts with qid: the questions are de-duplicated, not the ids;
    a file whose text column cannot be told is refused in one line naming its columns."""
    model = small_calibrated.path
    questions = data_dir / "insuranceqa" / "questions.csv"
    ran = invoke("dedupe", model, "--data", questions, "--out", tmp_path / "run", "--json", "--quiet")
    assert ran.returncode == 0, ran.stderr
    first = json.loads((tmp_path / "run" / "records.jsonl").read_text().splitlines()[0])
    assert first["text"] == "What Does Medicare IME Stand For?" and first["columns"]["qid"] == "0"
    for name, content, fragment in [
        (
            "pairs.csv",
            "qid1,qid2,question1,question2\n1,2,a,b\n",
            "which column holds the texts, question1 or question2?",
        ),
        ("ids.csv", "qid,score\n1,2\n", "no column is named like texts"),
        ("numbers.csv", "text,other\n17,x\n18,y\n", "column 'text' holds ids, not texts"),
    ]:
        (tmp_path / name).write_text(content)
        for command in (
            ["dedupe", model, "--out", tmp_path / "r2"],
            ["index", "build", model, "--out", tmp_path / "i2"],
            ["label", model, "--out", tmp_path / "l.csv", "--oracle-column", "qid", "--budget", "2"],
        ):
            ran = invoke(*command, "--data", tmp_path / name)
            assert ran.returncode == 2, (command, ran.stdout, ran.stderr)
            line = ran.stderr.strip()
            assert "\n" not in line and line.startswith("error: ") and fragment in line and "--column" in line
            assert "columns: " in line
    assert not (tmp_path / "r2").exists() and not (tmp_path / "i2").exists() and not (tmp_path / "l.csv").exists()
