"""The model card: ``README.md`` in every saved model folder, as sentence-transformers writes one —
what the model is, the data and recipe it came from, its threshold and how it was chosen, its
metrics, its calibration and its intended use — and, for a trained model, ``history.png``: the
loss, the validation loss and the metric per epoch (only when matplotlib is installed).

Everything comes from the model's config and ``info`` (what training, distillation or
``from_pretrained`` recorded), so a card never states a number the folder does not hold.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

MARKER = "<!-- written by siamese on every save: edit a copy, not this file -->"
CARD, PLOT = "README.md", "history.png"


def write_card(model, folder: Path) -> None:
    """Write ``README.md`` (and ``history.png`` when there is a history to plot) into ``folder``."""
    plotted = plot_history(_history(model), folder / PLOT)
    (folder / CARD).write_text(card(model, plotted=plotted), encoding="utf-8")


def ours(folder: Path) -> bool:
    """Whether ``folder``'s README.md is absent or a card siamese wrote (so it may be rewritten)."""
    file = folder / CARD
    if not file.is_file():
        return not file.exists()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return MARKER in file.read_text(encoding="utf-8")[:4096]
    return False


def card(model, *, plotted: bool = False) -> str:
    """The card's Markdown."""
    config, info = model.config, model.info
    sections = [
        MARKER,
        f"# Siamese model: {config.encoder} encoder, {config.head} head",
        _summary(model),
        "## Intended use\n\n" + _intended_use(model),
        "## How to use\n\n" + _how_to_use(model),
        "## Data and recipe\n\n" + _recipe(info),
        "## Threshold\n\n" + _threshold(model),
        "## Metrics\n\n" + _metrics(info, plotted),
        "## Calibration\n\n" + _calibration(model),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _summary(model) -> str:
    config = model.config
    rows = [
        ("encoder", config.encoder),
        ("head", config.head),
        ("loss", _loss(model)),
        ("vector width", model.dim),
        ("max tokens per text", config.max_length),
        ("tokenizer", _tokenizer(model)),
    ]
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _loss(model) -> str:
    """The loss the weights were trained with here: the config's names only the from-scratch recipe's."""
    info = model.info
    if "training" in info:
        return str(info["training"].get("loss", model.config.loss))
    learned = info.get("learned")
    if learned is not None:
        return str(learned.get("loss")) if learned.get("chosen") == "fine-tuned" else "none (kept as it is)"
    if "distillation" in info:
        return "distilled from the teacher's vectors"
    if "pretrained" in info:
        return "none (pretrained, used as it is)"
    return str(model.config.loss)


def _tokenizer(model) -> str:
    """The pretrained model's own tokenizer where it came with one, else the vocabulary learned here (the config's)."""
    from ..data.vocabulary import PretrainedVectorizer

    if isinstance(model.vectorizer, PretrainedVectorizer):
        kind = type(model.vectorizer.tokenizer.model).__name__
        added = ", with words of the distillation corpus added" if "distillation" in model.info else ""
        return f"the pretrained model's {kind}{added} (tokenizer.json)"
    return f"{model.config.tokenizer}, learned from the training texts"


def _intended_use(model) -> str:
    scale = "a cosine in [-1, 1]" if model.config.head == "cosine" else "a score in [0, 1]"
    return (
        "Judging whether two short texts (questions, sentences) say the same thing: the similarity is "
        f"{scale}, and a pair is a duplicate when it is above the threshold below. With the cosine head the "
        "vectors also serve duplicate search and corpus de-duplication. It knows only what its data taught "
        "it: check it on labelled pairs of your own before trusting its verdicts on another domain or language."
    )


def _how_to_use(model) -> str:
    folder = model.path.name if model.path is not None else "THIS_FOLDER"
    return (
        "```bash\n"
        f'siamese predict {folder} "When will I see you?" "When can I see you again?"\n'
        f"siamese evaluate {folder} --data labelled_pairs.csv\n"
        "```\n\n"
        "```python\n"
        "from siamese import SiameseModel\n\n"
        f'model = SiameseModel.load("{folder}")\n'
        'model.predict([("When will I see you?", "When can I see you again?")])\n'
        "```"
    )


def _recipe(info: dict) -> str:
    lines = []
    if "learned" in info:
        lines += _learned(info["learned"])
    elif "pretrained" in info:
        p = info["pretrained"]
        lines.append(
            f"- Pretrained encoder used as it is (no training): `{p.get('source')}` ({p.get('pooling')} pooling)."
        )
    if "distillation" in info:
        d = info["distillation"]
        teacher = d.get("teacher", {})
        named = teacher.get("name") or teacher.get("source", teacher) if isinstance(teacher, dict) else teacher
        learned = (
            f"on {d.get('corpus_texts', '?'):,}"
            + (f" of {d['corpus_distinct']:,}" if d.get("corpus_distinct", 0) > d.get("corpus_texts", 0) else "")
            + " texts"
            if d.get("epochs", 1)
            else "from its token vectors alone (epochs 0: no corpus text encoded)"
        )
        lines.append(f"- Distilled from `{named}` {learned} ({d.get('seconds', 0):.0f} s).")
    if "training" in info:
        t = info["training"]
        cfg = t.get("config", {})
        sources = [str(x) for x in t.get("sources") or []]
        named = f" ({sources[0]})" if sources and sources[0] != "None" else ""
        lines.append(
            f"- Trained on {t.get('train_pairs', '?'):,} pairs{named}; loss `{t.get('loss')}` "
            f"({_loss_uses(t.get('loss'))}); {cfg.get('epochs', '?')} epochs of batch {cfg.get('batch_size', '?')}, "
            f"learning rate {cfg.get('lr', '?')}; the weights of the best validation epoch ({t.get('best_epoch')})."
        )
        if t.get("val_pairs"):
            on = f" ({sources[1]})" if len(sources) > 1 and sources[1] != "None" else ""
            lines.append(
                f"- Validated on {t['val_pairs']:,} pairs{on}: the validation loss, threshold and calibration."
            )
    return "\n".join(lines) or "- Built without training (random or default weights): not for use as it is."


def _learned(learned: dict) -> list[str]:
    """What ``siamese train --from`` measured by cross-validation on the labels, and what it kept."""
    cv = learned.get("cross_validation", {})
    asis, tuned = cv.get("as_is", {}), cv.get("fine_tuned", {})
    source, labels = learned.get("source"), learned.get("labels", "?")
    if learned.get("chosen") == "fine-tuned":
        kept = (
            f"- Learned from {labels} labelled pairs starting from `{source}`: its top layers fine-tuned "
            f"(the bottom {learned.get('frozen_layers')} kept) with the `{learned.get('loss')}` loss for "
            f"{learned.get('epoch')} epoch{'s' * (learned.get('epoch') != 1)}, chosen by cross-validation on the "
            f"labels: {learned.get('plan')}."
        )
    else:
        kept = (
            f"- `{source}` kept as it is, its threshold set on {labels} labelled pairs: fine-tuning it on them did "
            f"not beat it by cross-validation ({learned.get('plan')})."
        )
    rows = "\n".join(
        f"| {name} | {_cell(m.get('accuracy'))} | {_cell(m.get('roc_auc'))} |"
        for name, m in (("as it is, threshold fitted", asis), ("fine-tuned", tuned))
    )
    return [kept, "", "| cross-validated on the labels | accuracy | ROC-AUC |\n|---|---|---|\n" + rows]


def _loss_uses(loss: str | None) -> str:
    if loss in ("triplet", "hinge", "mnr"):
        return "learns from the duplicate pairs; the rest of each batch gives the negatives"
    if loss in ("bce", "contrastive", "cosent"):
        return "learns from every labelled pair"
    if loss == "distill":
        return "reproduces a teacher's cosines"
    return "see the training config"


def _threshold(model) -> str:
    info = model.info
    latest = info.get("threshold_choice") or {}  # set after the model was made: calibrate's target, the label page
    if latest.get("by") == "calibrate" and latest.get("target") is not None:
        on = (latest.get("data") or {}).get("source") or "labelled pairs"
        metric = latest.get("metric", "recall")
        reached = f" ({metric} {latest[metric]:.3f} there)" if isinstance(latest.get(metric), float) else ""
        target = f"a target {metric} of {latest['target']}{reached}"
        return f"**{model.threshold:.4f}**: set by `siamese calibrate` on {on} for {target}."
    if latest.get("by") == "label":
        return f"**{model.threshold:.4f}**: set from the answers given on `siamese label`'s page."
    choice = (
        (info.get("training") or {}).get("threshold_choice")
        or (info.get("learned") or {}).get("threshold_choice")
        or (info.get("pretrained") or {}).get("threshold_choice")
        or (info.get("distillation") or {}).get("threshold_choice")
    )
    if choice and (choice.get("metric") or choice.get("chosen_on")):
        on = choice.get("chosen_on")
        where = f"on {', '.join(map(str, on))}" if isinstance(on, list) else "on the validation pairs"
        pairs = choice.get("val_pairs") or (info.get("training") or {}).get("val_pairs")
        best = f", where its {choice['metric']} is {choice['value']:.3f}" if "value" in choice else ""
        how = (  # decision.threshold.fit_threshold's rule: not the labels' most accurate cut
            " where a logistic (Platt) fit of the chance of a duplicate on the similarity crosses 1/2"
            if choice.get("rule") == "platt"
            else f" to maximise {choice.get('metric', 'the metric')}"
        )
        counted = f" ({pairs:,} pairs)" if pairs else ""
        return f"**{model.threshold:.4f}**: chosen {where}{counted}{how}{best}."
    return (
        f"**{model.threshold:.4f}**: the default, not chosen on validation pairs; choose one with `siamese calibrate`."
    )


def _history(model) -> list[dict]:
    return list((model.info.get("training") or {}).get("history") or [])


def _metrics(info: dict, plotted: bool) -> str:
    history = list((info.get("training") or {}).get("history") or [])
    if not history:
        return "No training history (see the threshold's metric above; `siamese evaluate` on your own pairs)."
    keys = [k for k in ("loss", "val_loss", *_metric_keys(history)) if any(k in h for h in history)]
    head = "| epoch | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys)
    rows = [
        f"| {h.get('epoch', n + 1)} | " + " | ".join(_cell(h.get(k)) for k in keys) + " |"
        for n, h in enumerate(history)
    ]
    picture = f"\n\n![loss, validation loss and metric per epoch]({PLOT})" if plotted else ""
    return head + "\n" + "\n".join(rows) + picture


def _metric_keys(history: list[dict]) -> list[str]:
    skip = {"epoch", "loss", "val_loss", "seconds"}
    return sorted(
        {
            k
            for h in history
            for k, v in h.items()
            if k not in skip and not k.endswith(("s", "_second")) and isinstance(v, (int, float))
        }
    )


def _cell(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else ("" if value is None else str(value))


def _calibration(model) -> str:
    calibrator = model.calibrator
    if calibrator is None:
        return (
            "Not calibrated: `probability` is None (null in the CLI and over HTTP); "
            "fit one with `siamese calibrate` on labelled pairs."
        )
    fitted = calibrator.fitted_on or {}
    where = f" ({fitted.get('path') or fitted.get('split') or 'given pairs'})" if fitted else ""
    return (
        f"{calibrator.method} on {calibrator.pairs:,} pairs{where}, {calibrator.positives:,} of them duplicates: "
        "`probability` maps a similarity to the share of duplicates among pairs like these."
    )


def plot_history(history: list[dict], file: Path) -> bool:
    """Plot loss, validation loss and the metrics per epoch to ``file``; False (nothing written)
    without a history or without matplotlib."""
    if not history:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        return False
    epochs = [h.get("epoch", n + 1) for n, h in enumerate(history)]
    metrics = _metric_keys(history)
    fig, axes = plt.subplots(1, 2 if metrics else 1, figsize=(9 if metrics else 5, 3.2), squeeze=False)
    for key in ("loss", "val_loss"):
        if any(key in h for h in history):
            axes[0][0].plot(epochs, [h.get(key) for h in history], marker="o", label=key.replace("_", " "))
    axes[0][0].set_xlabel("epoch")
    axes[0][0].legend()
    for key in metrics:
        axes[0][1].plot(epochs, [h.get(key) for h in history], marker="o", label=key)
    if metrics:
        axes[0][1].set_xlabel("epoch")
        axes[0][1].legend()
    fig.tight_layout()
    fig.savefig(file, dpi=80)
    plt.close(fig)
    return True
