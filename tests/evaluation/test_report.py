"""`evaluate --report/--errors`: one self-contained HTML page, escaped texts, every error listed."""

from __future__ import annotations

import base64
import csv
import json
import re

import matplotlib
import numpy as np
import pytest
from sklearn import metrics
from typer.testing import CliRunner

from siamese import SiameseModel, read_pairs
from siamese.cli import app
from siamese.evaluation.metrics import evaluate_pairs
from siamese.evaluation.report import build_report, confident_errors, metrics_over_thresholds

runner = CliRunner()
ATTACK = "<script>alert('x')</script> & more"


@pytest.fixture(scope="module")
def pairs_file(data_dir, tmp_path_factory):
    """MSRP val plus two pairs certain to be confident errors, one with markup in its text."""
    path = tmp_path_factory.mktemp("report") / "pairs.csv"
    val = read_pairs(data_dir / "msrp/msr-para-val.tsv", "msrp")
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text1", "text2", "label"])
        w.writerows(zip(val.text1, val.text2, val.labels.tolist()))
        w.writerow([ATTACK, ATTACK, 0])  # identical texts, similarity 1: the most confident false positive
        w.writerow(["zebra quantum", "pottery lunch", 1])
    return path


def test_report_and_errors_from_the_command_line(small_calibrated, pairs_file, tmp_path):
    report, errors = tmp_path / "report.html", tmp_path / "errors.csv"
    result = runner.invoke(
        app,
        [
            "evaluate",
            str(small_calibrated.path),
            "--data",
            str(pairs_file),
            "--report",
            str(report),
            "--errors",
            str(errors),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    page = report.read_text(encoding="utf-8")
    for section in (
        "Metrics",
        "Confusion matrix",
        "ROC curve",
        "Precision-recall curve",
        "Score histograms",
        "Reliability diagram",
        "Metrics against the threshold",
        "Most confident false positives",
        "Most confident false negatives",
    ):
        assert section in page, section
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 5
    assert all(base64.b64decode(i).startswith(b"\x89PNG\r\n\x1a\n") for i in images)
    assert not re.search(r"(src|href)=\"(?!data:)", page)  # nothing fetched from elsewhere
    # the texts are escaped: no live markup from the data
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page
    # errors.csv: exactly the misclassified pairs, with their scores
    (tn, fp), (fn, tp) = out["confusion_matrix"]
    with open(errors, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert out["errors"] == {"path": str(errors), "pairs": fp + fn} and len(rows) == fp + fn
    assert list(rows[0]) == ["line", "text1", "text2", "label", "similarity", "probability"]
    assert sum(r["label"] == "0" for r in rows) == fp
    t = out["threshold"]
    assert all((float(r["similarity"]) > t) != (r["label"] == "1") for r in rows)
    attack = [r for r in rows if r["text1"] == ATTACK]
    assert len(attack) == 1 and attack[0]["line"] == str(out["n"])  # the header is line 1


def test_siamese_evaluate_writes_the_report_and_errors_the_command_writes(small_calibrated, pairs_file, tmp_path):
    import siamese

    out = siamese.evaluate(
        small_calibrated.model, pairs_file, report=tmp_path / "report.html", errors=tmp_path / "errors.csv"
    )
    runner.invoke(
        app, ["evaluate", str(small_calibrated.path), "--data", str(pairs_file), "--errors", str(tmp_path / "cli.csv")]
    )
    assert out["errors"]["pairs"] > 0 and (tmp_path / "errors.csv").read_text() == (tmp_path / "cli.csv").read_text()
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert out["report"] == str(tmp_path / "report.html") and "Reliability diagram" in page and pairs_file.name in page
    with pytest.raises(siamese.ConfigError, match="give each its own file"):
        siamese.evaluate(small_calibrated.model, pairs_file, report=tmp_path / "x", errors=tmp_path / "x")


def test_confident_errors_are_the_extremes(small_calibrated, pairs_file):
    ev = evaluate_pairs(small_calibrated.model, read_pairs(pairs_file))
    fps, fns = confident_errors(ev, k=5)
    y = ev.pairs.labels.astype(bool)
    wrong_neg = np.sort(ev.scores[(ev.scores > ev.threshold) & ~y])[::-1]
    wrong_pos = np.sort(ev.scores[(ev.scores <= ev.threshold) & y])
    np.testing.assert_array_equal(ev.scores[fps], wrong_neg[:5])
    np.testing.assert_array_equal(ev.scores[fns], wrong_pos[:5])
    assert ev.pairs.text1[fps[0]] == ATTACK


def test_metrics_over_thresholds_match_sklearn(small_calibrated, pairs_file):
    ev = evaluate_pairs(small_calibrated.model, read_pairs(pairs_file))
    y = ev.pairs.labels
    grid = np.quantile(ev.scores, [0.0, 0.1, 0.5, 0.9]).tolist() + [ev.threshold]
    curves = metrics_over_thresholds(ev.scores, y, np.array(grid))
    for i, t in enumerate(grid):
        predicted = ev.scores > t
        assert curves["accuracy"][i] == pytest.approx(metrics.accuracy_score(y, predicted))
        assert curves["precision"][i] == pytest.approx(metrics.precision_score(y, predicted))
        assert curves["recall"][i] == pytest.approx(metrics.recall_score(y, predicted))
        assert curves["f1"][i] == pytest.approx(metrics.f1_score(y, predicted))
    assert np.isnan(metrics_over_thresholds(ev.scores, y, np.array([9.0]))["precision"][0])  # nothing called


def test_uncalibrated_report_says_so_and_leaves_matplotlib_alone(small_calibrated, pairs_file):
    model = SiameseModel.load(small_calibrated.path)
    model.calibrator = None
    backend = matplotlib.rcParams["backend"]
    page = build_report(evaluate_pairs(model, read_pairs(pairs_file)), title="t <b>", model="m", data="d")
    assert matplotlib.rcParams["backend"] == backend
    assert "not calibrated" in page and "<title>t &lt;b&gt;</title>" in page
    assert "probability" not in page.split("Most confident false positives")[1]  # no probability column
