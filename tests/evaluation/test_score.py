"""`siamese score`: every column kept, streamed in chunks, all or nothing written."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from siamese import SiameseModel, read_pairs
from siamese.cli import app
from siamese.evaluation.scoring import score_file

runner = CliRunner()


def read_rows(path, delimiter=","):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter=delimiter))


@pytest.fixture(scope="module")
def model(small_calibrated) -> SiameseModel:
    return SiameseModel.load(small_calibrated.path)


def test_unlabelled_file_keeps_every_column(model, small_calibrated, tmp_path):
    data = tmp_path / "pairs.csv"
    rows = [
        ["7", "When will I see you?", "When can I see you again?", 'says "hi", twice'],
        ["8", "Is it raining?", "Do they like hiking in the desert?", ""],
        ["9", "multi\nline text", "multi line text", "x"],
    ]
    with open(data, "w", newline="") as f:
        csv.writer(f).writerows([["id", "text1", "text2", "note"]] + rows)
    out = tmp_path / "scored.csv"
    result = runner.invoke(app, ["score", str(small_calibrated.path), "--data", str(data), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["pairs"] == 3 and summary["calibrated"] is True
    got = read_rows(out)
    assert got[0] == ["id", "text1", "text2", "note", "similarity", "probability", "duplicate"]
    assert [r[:4] for r in got[1:]] == rows  # every input value, quotes and line breaks included
    a, b = [r[1] for r in rows], [r[2] for r in rows]
    sims = model.similarity_pairwise(a, b)
    np.testing.assert_allclose([float(r[4]) for r in got[1:]], sims, atol=1e-6)
    np.testing.assert_allclose([float(r[5]) for r in got[1:]], model.probability(a, b), atol=1e-6)
    assert [r[6] for r in got[1:]] == [str(int(s > model.threshold)) for s in sims]


def test_labelled_tsv_streams_in_chunks(model, data_dir, tmp_path, monkeypatch):
    data = data_dir / "msrp/msr-para-val.tsv"  # MSRP: TSV, no quoting, a label column, 500 pairs
    out = tmp_path / "scored.tsv"
    seen = []
    similarity = model.similarity_pairwise

    def spy(a, b):
        seen.append(len(a))
        return similarity(a, b)

    monkeypatch.setattr(model, "similarity_pairwise", spy)
    progress = []
    summary = score_file(model, data, out, chunk_size=64, progress=lambda n, line: progress.append((n, line)))
    assert summary["pairs"] == 500
    assert max(seen) == 64 and sum(seen) == 500 and len(seen) == 8  # never more than one chunk at a time
    assert [n for n, _ in progress] == [64 * k for k in range(1, 8)] + [500]
    # read back as MSRP: the same pairs, labels and texts verbatim
    again, original = read_pairs(out, "msrp"), read_pairs(data, "msrp")
    assert again.text1 == original.text1 and again.text2 == original.text2
    np.testing.assert_array_equal(again.labels, original.labels)
    header = read_rows(out, "\t")[0]
    assert header[-3:] == ["similarity", "probability", "duplicate"]
    assert header[:-3] == [h.lstrip("\ufeff") for h in read_rows(data, "\t")[0]]


def test_cli_progress_lines_on_stderr(small_calibrated, tmp_path):
    data = tmp_path / "pairs.csv"
    data.write_text("text1,text2\n" + "".join(f"text number {i},another text {i}\n" for i in range(25)))
    out = tmp_path / "scored.csv"
    args = ["score", str(small_calibrated.path), "--data", str(data), "--out", str(out), "--overwrite"]
    quick = runner.invoke(app, [*args, "--batch-size", "10"])
    assert quick.exit_code == 0, quick.output
    assert quick.stderr == ""  # done within one interval (15 s): no line, no flood of one per chunk
    assert len(read_rows(out)) == 26
    # 1,000 pairs one at a time: over a second anywhere, so lines every 0.05 s
    data.write_text("text1,text2\n" + "".join(f"text number {i},another text {i}\n" for i in range(1000)))
    slow = runner.invoke(app, [*args, "--batch-size", "1"], env={"SIAMESE_PROGRESS_SECONDS": "0.05"})
    assert slow.exit_code == 0, slow.output
    lines = slow.stderr.splitlines()
    assert len(lines) >= 2 and all(line.startswith("score: ") and "/1,000 pairs (" in line for line in lines), lines
    assert " left" in lines[0] or "started" in lines[0]
    assert lines[-1].startswith("score: 1,000/1,000 pairs (100%) in ")  # the last says how long it took


@pytest.mark.parametrize(
    "body, where",
    [
        ("text1,text2,extra\na,b,c\nd,e\n", "bad.csv:3: expected 3 fields, found 2"),
        ("text1,text2\n" + "x,y\n" * 30 + ",z\n", "bad.csv:32: column 'text1' is empty"),  # after the first chunk
    ],
)
def test_bad_rows_are_refused_with_no_output(small_calibrated, tmp_path, body, where):
    data = tmp_path / "bad.csv"
    data.write_text(body)
    out = tmp_path / "scored.csv"
    result = runner.invoke(
        app,
        ["score", str(small_calibrated.path), "--data", str(data), "--out", str(out), "--batch-size", "8", "--quiet"],
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {data.parent}/{where}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]  # no output, no temporary file
    out.write_text("an earlier result\n")  # an existing output survives a failed run
    assert (
        runner.invoke(app, ["score", str(small_calibrated.path), "--data", str(data), "--out", str(out)]).exit_code == 2
    )
    assert out.read_text() == "an earlier result\n"


def test_refuses_to_overwrite_its_input_or_hide_a_column(small_calibrated, tmp_path):
    data = tmp_path / "pairs.csv"
    data.write_text("text1,text2,similarity\na,b,0.3\n")
    result = runner.invoke(app, ["score", str(small_calibrated.path), "--data", str(data), "--out", str(data)])
    assert result.exit_code == 2 and "is this command's input" in result.stderr
    result = runner.invoke(
        app, ["score", str(small_calibrated.path), "--data", str(data), "--out", str(tmp_path / "o.csv")]
    )
    assert result.exit_code == 2 and "already has column(s) 'similarity'" in result.stderr
    assert data.read_text() == "text1,text2,similarity\na,b,0.3\n"


def test_named_columns_and_uncalibrated_model(small_calibrated, tmp_path):
    model = SiameseModel.load(small_calibrated.path)
    model.calibrator = None
    data = tmp_path / "pairs.tsv"
    data.write_text("q_a\tq_b\nfirst question\tsecond question\n")
    out = tmp_path / "scored.csv"  # .csv: comma-separated whatever the input
    summary = score_file(model, data, out, text1="q_a", text2="q_b")
    assert summary["calibrated"] is False
    rows = read_rows(out)
    assert rows[0] == ["q_a", "q_b", "similarity", "duplicate"]  # no probability column when uncalibrated
    assert float(rows[1][2]) == pytest.approx(
        float(model.similarity_pairwise(["first question"], ["second question"])[0]), abs=1e-6
    )


def test_generic_tsv_columns_are_detected(model, tmp_path):
    data = tmp_path / "pairs.tsv"
    data.write_text("id\ttext1\ttext2\nq1\tHow do I learn Python?\tWhat is the best way to learn Python?\n")
    out = tmp_path / "scored.tsv"
    assert score_file(model, data, out)["pairs"] == 1
    rows = read_rows(out, "\t")
    assert rows[0] == ["id", "text1", "text2", "similarity", "probability", "duplicate"] and rows[1][0] == "q1"
