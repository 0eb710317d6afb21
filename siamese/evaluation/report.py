"""An evaluation as one self-contained HTML page (plots embedded as PNG), and the list of errors as CSV.

Plots are drawn on matplotlib ``Figure`` objects with the Agg canvas directly: no pyplot, no
global backend switch, nothing changed for the program that imports this.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import os
from pathlib import Path

import numpy as np
from sklearn import metrics

from ..decision.calibration import probabilities_or_clipped
from ..io.atomic import as_umask_allows, atomic_file
from .result import Evaluation

TOP_ERRORS = 20


def _png(fig) -> str:
    """The figure as an <img> with a base64 data URI."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # (the figure came from _figure)

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _figure(width: float = 5.0, height: float = 3.6):
    from ..io.extras import require

    require("report", "matplotlib")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def metrics_over_thresholds(scores: np.ndarray, labels: np.ndarray, thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, precision, recall and F1 of "duplicate when score > t" for each t (counts from
    sorted scores: one pass, not one sklearn call per threshold). Precision is NaN where no pair
    is called a duplicate (left out of the plot)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    pos, neg = np.sort(scores[labels]), np.sort(scores[~labels])
    tp = len(pos) - np.searchsorted(pos, thresholds, side="right")
    fp = len(neg) - np.searchsorted(neg, thresholds, side="right")
    fn, tn = len(pos) - tp, len(neg) - fp
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), np.nan)  # undefined with no duplicate called
        recall = tp / max(len(pos), 1)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    return {"accuracy": (tp + tn) / max(len(scores), 1), "precision": precision, "recall": recall, "f1": f1}


def _curves(ev: Evaluation) -> list[tuple[str, str]]:
    """(section title, HTML) for each plot."""
    y = np.asarray(ev.pairs.labels).astype(int)
    s, t = ev.scores, ev.threshold
    both = len(np.unique(y)) == 2
    sections = []
    if both:
        fig, ax = _figure()
        fpr, tpr, _ = metrics.roc_curve(y, s)
        ax.plot(fpr, tpr, label=f"ROC-AUC {metrics.auc(fpr, tpr):.3f}")
        ax.plot([0, 1], [0, 1], ":", color="grey", label="chance")
        cm = metrics.confusion_matrix(y, (s > t).astype(int), labels=[0, 1])
        ax.plot(
            cm[0, 1] / max(cm[0].sum(), 1), cm[1, 1] / max(cm[1].sum(), 1), "o", color="C3", label=f"threshold {t:.3f}"
        )
        ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC curve")
        ax.legend(loc="lower right")
        sections.append(("ROC curve", _png(fig)))

        fig, ax = _figure()
        precision, recall, _ = metrics.precision_recall_curve(y, s)
        ax.plot(recall, precision, label=f"AP {metrics.average_precision_score(y, s):.3f}")
        ax.axhline(y.mean(), ls=":", color="grey", label=f"positive rate {y.mean():.3f}")
        at = metrics_over_thresholds(s, y, np.array([t]))
        ax.plot(at["recall"], at["precision"], "o", color="C3", label=f"threshold {t:.3f}")
        ax.set(xlabel="recall", ylabel="precision", title="Precision-recall curve", ylim=(0, 1.02))
        ax.legend(loc="lower left")
        sections.append(("Precision-recall curve", _png(fig)))

    fig, ax = _figure(6.0)
    bins = np.linspace(min(s.min(), t), max(s.max(), t), 41)
    for label, name, color in ((0, "not duplicate (0)", "C0"), (1, "duplicate (1)", "C1")):
        ax.hist(s[y == label], bins=bins, alpha=0.55, color=color, label=f"{name}: {(y == label).sum()}")
    ax.axvline(t, color="C3", ls="--", label=f"threshold {t:.3f}")
    ax.set(xlabel="similarity", ylabel="pairs", title="Scores per class")
    ax.legend()
    sections.append(("Score histograms", _png(fig)))

    from sklearn.calibration import calibration_curve

    p = probabilities_or_clipped(s, None) if ev.probabilities is None else ev.probabilities
    fig, ax = _figure(5.0, 4.2)
    truth, predicted = calibration_curve(y, p, n_bins=10, strategy="uniform")
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfectly calibrated")
    what = "calibrated probability" if ev.probabilities is not None else "raw score clipped to [0, 1] (not calibrated)"
    ax.plot(predicted, truth, "o-", label=what)
    ax.hist(
        p,
        bins=10,
        range=(0, 1),
        weights=np.full(len(p), 1 / max(len(p), 1)),
        alpha=0.25,
        color="grey",
        label="share of pairs per bin",
    )
    ax.set(
        xlabel="predicted probability",
        ylabel="share of duplicates",
        xlim=(0, 1),
        ylim=(0, 1.02),
        title=f"Reliability diagram (ECE {ev.metrics['ece']:.3f})",
    )
    ax.legend(loc="upper left", fontsize="small")
    sections.append(("Reliability diagram", _png(fig)))

    fig, ax = _figure(6.0)
    grid = np.linspace(min(s.min(), t), max(s.max(), t), 201)
    curves = metrics_over_thresholds(s, y, grid)
    for name, values in curves.items():
        ax.plot(grid, values, label=name)
    ax.axvline(t, color="C3", ls="--", label=f"threshold {t:.3f}")
    ax.set(xlabel="threshold", ylabel="value", ylim=(0, 1.02), title="Metrics against the threshold")
    ax.legend(fontsize="small")
    sections.append(("Metrics against the threshold", _png(fig)))
    return sections


def _table(rows: list[list], header: list[str]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "—" if value is None else str(value)


def confident_errors(ev: Evaluation, k: int = TOP_ERRORS) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the k most confident false positives (highest scores among the non-duplicates
    called duplicates) and false negatives (lowest scores among the duplicates missed)."""
    y = np.asarray(ev.pairs.labels).astype(bool)
    wrong = ev.predicted != y
    fp = np.flatnonzero(wrong & ~y)
    fn = np.flatnonzero(wrong & y)
    return fp[np.argsort(-ev.scores[fp], kind="stable")][:k], fn[np.argsort(ev.scores[fn], kind="stable")][:k]


def _error_rows(ev: Evaluation, index: np.ndarray) -> str:
    lines = ev.pairs.line_numbers
    rows = [
        [lines[i] if lines is not None else i + 1, ev.pairs.text1[i], ev.pairs.text2[i], f"{ev.scores[i]:.4f}"]
        + ([f"{ev.probabilities[i]:.4f}"] if ev.probabilities is not None else [])
        for i in index
    ]
    header = ["line", "text 1", "text 2", "similarity"] + (["probability"] if ev.probabilities is not None else [])
    return _table(rows, header) if rows else "<p>None.</p>"


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { border: 1px solid #ccc; padding: 0.25em 0.6em;
text-align: left; vertical-align: top; } th { background: #f3f3f3; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plots figure { margin: 0; }
img { max-width: 100%; } .note { color: #555; }
"""


def build_report(ev: Evaluation, *, title: str = "Evaluation", model: str = "", data: str = "") -> str:
    """The whole page as a string: metrics, plots, confusion matrix, most confident errors."""
    m = ev.metrics
    keys = [
        "n",
        "threshold",
        "accuracy",
        "precision",
        "recall",
        "f1",
        "roc_auc",
        "average_precision",
        "brier",
        "ece",
        "log_loss",
        "spearman",
        "pearson",
    ]
    summary = _table([[k, _fmt(m[k])] for k in keys if k in m], ["metric", "value"])
    calibration_note = (
        "Probabilities are the model's calibrated ones."
        if ev.probabilities is not None
        else "The model is not calibrated: Brier, ECE and log-loss are of the raw similarity clipped to "
        "[0, 1] (run <code>siamese calibrate</code>)."
    )
    (tn, fp), (fn, tp) = m["confusion_matrix"]
    confusion = _table(
        [["actual: not duplicate (0)", tn, fp], ["actual: duplicate (1)", fn, tp]],
        ["", "predicted: not duplicate", "predicted: duplicate"],
    )
    plots = "".join(
        f"<figure><figcaption><h2>{html.escape(name)}</h2></figcaption>{img}</figure>" for name, img in _curves(ev)
    )
    fps, fns = confident_errors(ev)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">Model <code>{html.escape(model)}</code> on <code>{html.escape(data)}</code>: {m["n"]} pairs,
duplicate when similarity &gt; {ev.threshold:.4f}. {calibration_note}</p>
<h2 id="metrics">Metrics</h2>{summary}
<h2 id="confusion-matrix">Confusion matrix</h2>{confusion}
<div class="plots">{plots}</div>
<h2 id="false-positives">Most confident false positives (non-duplicates scored highest)</h2>
<p class="note">{int(fp)} in all; the top {len(fps)}.</p>{_error_rows(ev, fps)}
<h2 id="false-negatives">Most confident false negatives (duplicates scored lowest)</h2>
<p class="note">{int(fn)} in all; the top {len(fns)}.</p>{_error_rows(ev, fns)}
</body></html>
"""


def write_report(path: str | os.PathLike, ev: Evaluation, **kw) -> Path:
    """Write :func:`build_report` to ``path`` atomically."""
    page = build_report(ev, **kw)
    path = Path(path)
    with atomic_file(path) as tmp:
        tmp.write_text(page, encoding="utf-8", errors="surrogateescape")
        as_umask_allows(tmp)
    return path


def write_errors(path: str | os.PathLike, ev: Evaluation) -> int:
    """Every misclassified pair as CSV (line, text1, text2, label, similarity, probability when
    calibrated), atomically. Returns how many."""
    y = np.asarray(ev.pairs.labels).astype(int)
    wrong = np.flatnonzero(ev.predicted != y.astype(bool))
    lines = ev.pairs.line_numbers
    path = Path(path)
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                ["line", "text1", "text2", "label", "similarity"]
                + (["probability"] if ev.probabilities is not None else [])
            )
            for i in wrong:
                writer.writerow(
                    [
                        lines[i] if lines is not None else i + 1,
                        ev.pairs.text1[i],
                        ev.pairs.text2[i],
                        y[i],
                        f"{ev.scores[i]:.6f}",
                    ]
                    + ([f"{ev.probabilities[i]:.6f}"] if ev.probabilities is not None else [])
                )
        as_umask_allows(tmp)
    return len(wrong)
