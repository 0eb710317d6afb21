"""Emoji runs from files to folders, as ``siamese emoji …`` makes them: :func:`train_vae_files` trains the VAE
on the emoji images into a folder, :func:`encode_files` writes every emoji's code to a CSV, :func:`generate_files`
decodes new emojis into PNG sheets, :func:`train_files` trains the text→emoji model on tweets and reports it
beside the baselines, :func:`evaluate_files` scores a model on labelled tweets and :func:`suggest_files` ranks
emojis for a text. Each takes the command's options as
keywords (the same names and defaults: the command takes its defaults from here), checks its outputs before any
work, and returns a :class:`~siamese.io.report.RunReport` holding what the command prints.

Imports nothing heavy: torch and the models are imported inside the functions."""

from __future__ import annotations

import os
from pathlib import Path

from ..io.report import RunReport

# The best text side on validation tweets that trains in a few minutes here: frozen mpnet, validation
# 0.835 / test 0.836 (mean of three splits), against frozen MiniLM 0.830 / 0.825 and the BiLSTM
# 0.795 / 0.800. MiniLM fine-tuned for 1 epoch ties it (0.838 / 0.834) but its top-5 over all emojis
# share the tweet's sentiment less often (0.745 vs 0.808); docs/benchmarks.md, "Emoji".
DEFAULT_TEXT_ENCODER = "mpnet"


def default_glove() -> Path:
    """The GloVe vectors a BiLSTM text side starts from unless told otherwise: the shared 50-d subset."""
    from ..data.datasets import data_root

    return data_root() / "glove" / "glove-50d-5k.json"


def train_vae_files(
    out: str | os.PathLike,
    *,
    images: str | os.PathLike | None = None,
    epochs: int = 15,
    batch_size: int = 16,
    lr: float = 0.001,
    filters: int = 64,
    latent_dim: int = 16,
    dropout: float = 0.8,
    val_fraction: float = 0.2,
    seed: int = 0,
    device: str = "auto",
    overwrite: bool = False,
    progress: bool = True,
) -> RunReport:
    """Train the convolutional VAE on the emoji images of ``images`` (default: the shared Twemoji set; an 80/20
    split, both losses per epoch, the best validation epoch kept) into the folder ``out``, which is checked
    first and written only if training succeeds; the count of emojis whose code is inf/NaN is recorded in the
    VAE's ``info``. As ``siamese emoji train-vae`` does; the report's ``value`` is the
    :class:`~siamese.emoji.vae.EmojiVAE`."""
    from ..io.atomic import check_not_input, check_target

    out = Path(out)
    check_not_input(out, [images])
    check_target(out, overwrite=overwrite, kind="model")
    from .images import load_emojis
    from .vae import VAEConfig
    from .vae_train import VAETrainConfig, train_vae

    emojis = load_emojis(images)
    vae = train_vae(
        emojis,
        model_config=VAEConfig(latent_dim=latent_dim, filters=filters, dropout=dropout),
        config=VAETrainConfig(
            epochs=epochs, batch_size=batch_size, lr=lr, val_fraction=val_fraction, seed=seed, device=device
        ),
        progress=progress,
    )
    non_finite = _non_finite(vae.encode(emojis.images))
    vae.info["non_finite_codes"] = non_finite
    vae.save(out, overwrite=overwrite)
    info = vae.info["training"]
    result = {
        "out": str(out),
        "emojis": len(emojis),
        "train_images": info["train_images"],
        "val_images": info["val_images"],
        "history": info["history"],
        "best_epoch": info["best_epoch"],
        "val_loss": info["val_loss"],
        "non_finite_codes": non_finite,
        "seconds": info["seconds"],
        "seconds_per_epoch": info["seconds_per_epoch"],
    }
    lines = [
        f"epoch {h['epoch']:>3}: loss {h['loss']:.2f}  val_loss {h['val_loss']:.2f}  ({h['seconds']:.1f}s)"
        for h in info["history"]
    ]
    lines += [
        f"best epoch {info['best_epoch']} (val_loss {info['val_loss']:.2f}); {non_finite} of {len(emojis)} codes "
        "inf/NaN",
        f"saved to {out}",
    ]
    return RunReport(result, lines, vae)


def _non_finite(codes) -> int:
    """How many codes hold an inf or NaN."""
    import numpy as np

    return int((~np.isfinite(codes)).any(axis=1).sum())


def encode_files(
    vae_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    images: str | os.PathLike | None = None,
    device: str = "auto",
    overwrite: bool = False,
) -> RunReport:
    """Encode every emoji image of ``images`` (default: the shared Twemoji set) with the VAE of ``vae_dir`` into
    its code (the Gaussian's mean) and write them to the CSV ``out`` (codepoints, char, z0 … z{d-1}; atomically;
    an existing file only with ``overwrite``). As ``siamese emoji encode`` does; the report's ``value`` is the
    (emojis, d) array of codes."""
    from ..io.atomic import check_file_target
    from .images import load_emojis
    from .vae import EmojiVAE

    out = check_file_target(out, overwrite=overwrite, inputs=[vae_dir, images])
    vae = EmojiVAE.load(vae_dir, device=device)
    emojis = load_emojis(images)
    codes = vae.encode(emojis.images)
    non_finite = _non_finite(codes)
    write_codes_csv(out, emojis.names, codes)
    result = {"out": str(out), "emojis": len(emojis), "dim": int(codes.shape[1]), "non_finite_codes": non_finite}
    lines = [f"encoded {len(emojis)} emojis into {codes.shape[1]}-d codes ({non_finite} inf/NaN); written to {out}"]
    return RunReport(result, lines, codes)


def write_codes_csv(path: str | os.PathLike, names: list[str], codes) -> None:
    """Codes as CSV: codepoints, char, z0 … z{d-1} (6 significant digits); written atomically."""
    import csv

    from ..io.atomic import as_umask_allows, atomic_file
    from .images import name_to_char

    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["codepoints", "char", *(f"z{i}" for i in range(codes.shape[1]))])
            for name, code in zip(names, codes):
                writer.writerow([name, name_to_char(name), *(f"{v:.6g}" for v in code)])
        as_umask_allows(tmp)


def generate_files(
    vae_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    samples: int = 100,
    patterns: str = "A,B,C",
    ticks: int = 20,
    low: float = -2.0,
    high: float = 2.0,
    reconstructions: int = 24,
    between: str | None = None,
    steps: int = 12,
    scale: int = 1,
    images: str | os.PathLike | None = None,
    seed: int = 0,
    device: str = "auto",
    overwrite: bool = False,
) -> RunReport:
    """Decode Gaussian samples, the 2-D grids of ``patterns`` (comma-separated: A, B, C; empty for none),
    reconstructions and an interpolation ``between`` two emojis (``"FROM,TO"``, code points or characters) of the
    VAE in ``vae_dir`` into PNG sheets in the folder ``out``; a sheet already there is replaced only with
    ``overwrite``. As ``siamese emoji generate`` does; the report's ``value`` is the written paths."""
    from ..errors import ConfigError
    from ..io.atomic import check_not_input
    from .generate import write_sheets
    from .vae import EmojiVAE

    check_not_input(out, [vae_dir, images])
    ends = None
    if between is not None:
        ends = tuple(part.strip() for part in between.split(",") if part.strip())
        if len(ends) != 2:
            raise ConfigError(f"--between takes two emojis separated by a comma, got {between!r}")
    written = write_sheets(
        EmojiVAE.load(vae_dir, device=device),
        out,
        samples=samples,
        patterns=tuple(p.strip().upper() for p in patterns.split(",") if p.strip()),
        ticks=ticks,
        low=low,
        high=high,
        reconstructions=reconstructions,
        between=ends,  # type: ignore[arg-type]  # two, checked above
        steps=steps,
        scale=scale,
        images=images,
        seed=seed,
        overwrite=overwrite,
    )
    return RunReport({"out": str(out), "files": [str(f) for f in written]}, [f"wrote {f}" for f in written], written)


def train_files(
    vae_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    data: str | os.PathLike | None = None,
    text_encoder: str = DEFAULT_TEXT_ENCODER,
    fine_tune: bool = False,
    encoder_lr: float = 2e-5,
    images: str | os.PathLike | None = None,
    glove: str | os.PathLike | None = None,
    no_glove: bool = False,
    sentiment_aware: bool = True,
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 1e-3,
    margin: float = 0.2,
    test_fraction: float = 0.2,
    val_fraction: float = 0.08,
    limit: int | None = None,
    min_frequency: int = 2,
    word_dropout: float = 0.1,
    sentiment_weight: float = 0.3,
    average_from: int = 6,
    seed: int = 0,
    device: str = "auto",
    overwrite: bool = False,
    progress: bool = True,
) -> RunReport:
    """Train the text→emoji model on the sentiment-labelled tweets of ``data`` (default: the shared airline
    tweets; ``limit``: only the first N), the emojis embedded by the VAE of ``vae_dir``, into the folder ``out``
    (checked first, written only if training succeeds), and report its held-out test accuracy beside the
    majority class and TF-IDF + logistic regression. ``text_encoder``: mpnet, minilm, bilstm (its word embedding
    from ``glove``, default :func:`default_glove`, or random with ``no_glove``), ``student:FOLDER`` or a model
    folder; ``average_from``: average the weights of this epoch and later ones (0: keep the best epoch on
    validation). As ``siamese emoji train`` does; the report's ``value`` is the
    :class:`~siamese.emoji.text_model.TextEmojiModel`."""
    from ..io.atomic import check_not_input, check_target

    out = Path(out)
    check_not_input(out, [vae_dir, data])
    check_target(out, overwrite=overwrite, kind="model")
    from .images import load_emojis
    from .text_model import TextEmojiConfig
    from .text_model_eval import data_record, train_and_evaluate
    from .text_model_train import TextEmojiTrainConfig
    from .tweets import default_tweets, read_tweets
    from .vae import EmojiVAE

    tweets = read_tweets(data)
    if limit:
        tweets = tweets.subset(range(min(limit, len(tweets))))
    vae = EmojiVAE.load(vae_dir, device=device)
    emojis = load_emojis(images)
    model, report = train_and_evaluate(
        tweets,
        codes=vae.encode(emojis.images),
        names=emojis.names,
        model_config=TextEmojiConfig(
            code_dim=vae.config.latent_dim,
            sentiment_aware=sentiment_aware,
            min_frequency=min_frequency,
            fine_tune=fine_tune,
        ),
        config=TextEmojiTrainConfig(
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            margin=margin,
            word_dropout=word_dropout,
            sentiment_weight=sentiment_weight,
            average_from=average_from or None,
            encoder_lr=encoder_lr,
            seed=seed,
            device=device,
        ),
        glove_path=None if no_glove else (glove or default_glove()),
        test_fraction=test_fraction,
        val_fraction=val_fraction,
        text_encoder=text_encoder,
        data=data_record(
            data or default_tweets(), seed=seed, test_fraction=test_fraction, val_fraction=val_fraction, limit=limit
        ),
        progress=progress,
    )
    model.save(out, overwrite=overwrite)
    result = {"out": str(out)} | report
    return RunReport(result, _train_lines(result, text_encoder, fine_tune, len(model.names)), model)


def _train_lines(result: dict, text_encoder: str, fine_tune: bool, emojis: int) -> list[str]:
    """What ``siamese emoji train`` prints for a person."""
    averaged = result["averaged_epochs"]
    kept = (
        f"weights averaged over epochs {averaged[0]}–{averaged[1]}"
        if averaged
        else f"best epoch {result['best_epoch']}"
    )
    calibration = result["calibration"]
    return [
        f"trained on {result['train_tweets']} tweets ({text_encoder}{', fine-tuned' if fine_tune else ''}) for "
        f"{len(result['history'])} epochs in {result['seconds']:.1f}s; {kept} (validation accuracy "
        f"{result['val_accuracy']:.4f})",
        f"softmax temperatures fitted on the validation tweets: {calibration['temperature']:.4f} (3-way sentiment), "
        f"{calibration['suggestions']['temperature']:.4f} (suggestions over all {emojis} emojis)",
        *report_lines(f"held-out test ({result['test']['n']} tweets)", result["test"], result["baselines"], emojis),
        f"saved to {result['out']}",
    ]


def report_lines(title: str, report: dict, baselines: dict, emojis: int) -> list[str]:
    """A test report (:func:`~siamese.emoji.text_model_eval.evaluate_text_emoji`) and its baselines as lines:
    accuracy and recall, the confusion matrix, the baselines' accuracy, the top-5 sentiment agreement among
    ``emojis`` emojis, and the probabilities' calibration when the model has temperatures."""
    recall = ", ".join(f"{k} {v:.3f}" for k, v in report["recall"].items())
    calibration = report.get("calibration")
    return [
        f"{title}: accuracy {report['accuracy']:.4f} (recall: {recall})",
        f"  confusion matrix (rows true, columns predicted; positive, neutral, negative): {report['confusion_matrix']}",
        f"  majority class {baselines['majority']['accuracy']:.4f}, TF-IDF + logistic regression "
        f"{baselines['tfidf_logreg']['accuracy']:.4f}",
        f"  top-5 suggestions among all {emojis} emojis sharing the tweet's sentiment: "
        f"{report['sentiment_agreement_at_5']:.3f}",
        *(
            [f"  3-way probabilities: log-loss {calibration['log_loss']:.4f}, ECE {calibration['ece']:.4f}"]
            if calibration
            else []
        ),
        *(
            [
                f"  suggestion probabilities (mean per tweet): top-1 {sug['top1']:.2%}, top-5 together "
                f"{sug['top5_total']:.1%}, "
                f"median emoji {sug['median_emoji']:.3%}, on the tweet's sentiment's emojis "
                f"{sug['mass_on_tweet_sentiment']:.1%}"
            ]
            if (sug := report.get("suggestions"))
            else []
        ),
    ]


def evaluate_files(
    model_dir: str | os.PathLike, *, data: str | os.PathLike | None = None, device: str = "auto"
) -> RunReport:
    """3-way accuracy, per-class recall, confusion matrix and top-5 sentiment agreement of the model of
    ``model_dir`` on the labelled tweets of ``data`` (default: the model's own file, whose held-out test split
    is scored), beside the majority class and TF-IDF + logistic regression trained on the model's training
    tweets (:func:`~siamese.emoji.text_model_eval.evaluate_file`). As ``siamese emoji evaluate`` does."""
    from .text_model_eval import evaluate_file

    result = evaluate_file(model_dir, data, device=device)
    lines = [
        f"{result['data']}: {result['scored']}",
        *report_lines(f"{result['n']} tweets", result, result["baselines"], result["emojis"]),
    ]
    return RunReport(result, lines)


def suggest_files(
    model_dir: str | os.PathLike,
    text: str,
    *,
    k: int = 5,
    png: str | os.PathLike | None = None,
    generated: int = 0,
    vae_dir: str | os.PathLike | None = None,
    images: str | os.PathLike | None = None,
    seed: int = 0,
    device: str = "auto",
    overwrite: bool = False,
) -> RunReport:
    """The top-``k`` emojis of the model of ``model_dir`` for ``text`` (with ``generated`` new ones decoded
    from Gaussian samples by the VAE of ``vae_dir``) and the text's 3-way sentiment
    (:func:`~siamese.emoji.suggest.suggest_emojis`); ``png``: also draw them into this PNG file (checked
    first; an existing file only with ``overwrite``). As ``siamese emoji suggest`` does."""
    from ..io.atomic import check_file_target
    from .suggest import suggest_emojis

    if png is not None:
        png = check_file_target(png, overwrite=overwrite, inputs=[model_dir, vae_dir, images])
    suggestions, sentiment = suggest_emojis(
        Path(model_dir),
        text,
        k=k,
        generated=generated,
        vae_dir=None if vae_dir is None else Path(vae_dir),
        images=None if images is None else Path(images),
        png=png,
        seed=seed,
        device=device,
    )
    result = {"text": text, "sentiment": sentiment, "suggestions": suggestions} | ({"png": str(png)} if png else {})
    lines = ["sentiment: " + ", ".join(f"{label} {p:.0%}" for label, p in sentiment.items())] if sentiment else []
    lines += [
        ("" if s["probability"] is None else f"{s['probability']:7.2%}  ")
        + f"cos {s['score']:+.3f}  {s['char']}  {s['label']}"
        for s in suggestions
    ]
    return RunReport(result, lines + ([f"wrote {png}"] if png else []))
