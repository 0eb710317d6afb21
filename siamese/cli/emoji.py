"""``siamese emoji …``: train the emoji VAE, encode and generate emojis, train the text→emoji
model and suggest emojis for a text. Errors and ``--json`` behave as in the main commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import ConfigError
from .common import DeviceOpt, JsonOpt, OverwriteOpt, check_out_folder, emit, user_errors

# mounted as `siamese emoji` by siamese/cli/root.py (this module does not import the app: no cycle)
emoji_app = typer.Typer(no_args_is_help=True, help="Emoji VAE and text→emoji Siamese model.")

ImagesOpt = Annotated[
    Optional[Path], typer.Option("--images", help="Folder of 36x36 emoji PNGs (default: the shared Twemoji set).")
]
# The best text side on validation tweets that trains in a few minutes here: frozen mpnet, validation
# 0.835 / test 0.836 (mean of three splits), against frozen MiniLM 0.830 / 0.825 and the BiLSTM
# 0.795 / 0.800. MiniLM fine-tuned for 1 epoch ties it (0.838 / 0.834) but its top-5 over all emojis
# share the tweet's sentiment less often (0.745 vs 0.808); docs/benchmarks.md, "Emoji".
DEFAULT_TEXT_ENCODER = "mpnet"
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


@emoji_app.command("train-vae")
@user_errors
def train_vae(
    out: Annotated[Path, typer.Option("--out", help="VAE folder to write (only written if training succeeds).")],
    images: ImagesOpt = None,
    epochs: Annotated[int, typer.Option(min=1)] = 15,
    batch_size: Annotated[int, typer.Option(min=1)] = 16,
    lr: Annotated[
        float, typer.Option(min=0.0, help="Adam learning rate (0.003 collapses to one blurred emoji).")
    ] = 0.001,
    filters: Annotated[int, typer.Option(min=1, help="Channels of every convolution.")] = 64,
    latent_dim: Annotated[int, typer.Option(min=4, help="Size of an emoji's code.")] = 16,
    dropout: Annotated[float, typer.Option(min=0.0, max=0.95, help="Share of decoder units dropped.")] = 0.8,
    val_fraction: Annotated[float, typer.Option(min=0.01, max=0.9)] = 0.2,
    seed: int = 0,
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Train the convolutional VAE on emoji images (80/20 split); report both losses per epoch."""
    check_out_folder(out, overwrite, inputs=[images])
    import numpy as np

    from ..emoji.images import load_emojis
    from ..emoji.vae import VAEConfig
    from ..emoji.vae_train import VAETrainConfig
    from ..emoji.vae_train import train_vae as run_training

    emojis = load_emojis(images)
    vae = run_training(
        emojis,
        model_config=VAEConfig(latent_dim=latent_dim, filters=filters, dropout=dropout),
        config=VAETrainConfig(
            epochs=epochs, batch_size=batch_size, lr=lr, val_fraction=val_fraction, seed=seed, device=device
        ),
        progress=not quiet,
    )
    codes = vae.encode(emojis.images)
    non_finite = int((~np.isfinite(codes)).any(axis=1).sum())
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
    emit(result, as_json, lines)


def _codes_csv(path: Path, names: list[str], codes) -> None:
    """Codes as CSV: codepoints, char, z0 … z{d-1}; written atomically."""
    import csv

    from ..emoji.images import name_to_char
    from ..io.atomic import atomic_file

    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["codepoints", "char", *(f"z{i}" for i in range(codes.shape[1]))])
        for name, code in zip(names, codes):
            writer.writerow([name, name_to_char(name), *(f"{v:.6g}" for v in code)])


@emoji_app.command("encode")
@user_errors
def encode(
    vae_dir: Annotated[Path, typer.Argument(help="VAE folder (from train-vae).")],
    out: Annotated[Path, typer.Option("--out", help="CSV to write: codepoints, char, z0 … z15.")],
    images: ImagesOpt = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Encode every emoji image into its VAE code (the Gaussian's mean) and count inf/NaN codes."""
    import numpy as np

    from ..emoji.images import load_emojis
    from ..emoji.vae import EmojiVAE
    from ..io.atomic import check_not_input

    check_not_input(out, [vae_dir, images])
    vae = EmojiVAE.load(vae_dir, device=device)
    emojis = load_emojis(images)
    codes = vae.encode(emojis.images)
    non_finite = int((~np.isfinite(codes)).any(axis=1).sum())
    _codes_csv(out, emojis.names, codes)
    result = {"out": str(out), "emojis": len(emojis), "dim": int(codes.shape[1]), "non_finite_codes": non_finite}
    emit(
        result,
        as_json,
        [f"encoded {len(emojis)} emojis into {codes.shape[1]}-d codes ({non_finite} inf/NaN); written to {out}"],
    )


@emoji_app.command("generate")
@user_errors
def generate(
    vae_dir: Annotated[Path, typer.Argument(help="VAE folder (from train-vae).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the PNG sheets (created if needed).")],
    samples: Annotated[int, typer.Option(min=0, help="Gaussian samples to decode (0 = none).")] = 100,
    patterns: Annotated[
        str, typer.Option(help="2-D grid patterns, comma-separated: A, B, C (empty = none).")
    ] = "A,B,C",
    ticks: Annotated[int, typer.Option(min=2, help="Grid points per axis.")] = 20,
    low: float = -2.0,
    high: float = 2.0,
    reconstructions: Annotated[
        int, typer.Option(min=0, help="Emojis shown beside their reconstructions (the VAE's validation emojis first).")
    ] = 24,
    between: Annotated[
        Optional[str],
        typer.Option(help="Interpolate between two emojis: 'FROM,TO' as code points or characters, e.g. 1f389,1f621."),
    ] = None,
    steps: Annotated[int, typer.Option(min=2, help="Interpolation steps.")] = 12,
    scale: Annotated[int, typer.Option(min=1, max=8, help="Pixel scale of each emoji in the sheets.")] = 1,
    images: ImagesOpt = None,
    seed: int = 0,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Decode Gaussian samples, 2-D grids, reconstructions and an interpolation to PNGs."""
    from ..emoji.generate import write_sheets
    from ..emoji.vae import EmojiVAE
    from ..io.atomic import check_not_input

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
        between=ends,
        steps=steps,
        scale=scale,
        images=images,
        seed=seed,
    )
    emit({"out": str(out), "files": [str(f) for f in written]}, as_json, [f"wrote {f}" for f in written])


@emoji_app.command("train")
@user_errors
def train(
    vae_dir: Annotated[Path, typer.Option("--vae", help="VAE folder whose codes embed the emojis.")],
    out: Annotated[Path, typer.Option("--out", help="Model folder to write (only written if training succeeds).")],
    data: Annotated[
        Optional[Path],
        typer.Option(
            "--data",
            help="Tweets CSV with 'text' and 'airline_sentiment' columns (default: the shared airline tweets).",
        ),
    ] = None,
    text_encoder: Annotated[
        str,
        typer.Option(
            "--text-encoder",
            help=(
                "The text side: mpnet (default; make mpnet), minilm, bilstm (from GloVe), "
                "student:FOLDER (siamese distill) or a model FOLDER."
            ),
        ),
    ] = DEFAULT_TEXT_ENCODER,
    fine_tune: Annotated[
        bool,
        typer.Option(
            "--fine-tune",
            help="Also train the sentence encoder (slow on a CPU; default: frozen, its vectors computed once).",
        ),
    ] = False,
    encoder_lr: Annotated[
        float, typer.Option(min=0.0, help="Learning rate of the sentence encoder with --fine-tune.")
    ] = 2e-5,
    images: ImagesOpt = None,
    glove: Annotated[
        Optional[Path],
        typer.Option(help="GloVe vectors (.txt or .json) for the word embedding (default: the shared 50-d subset)."),
    ] = None,
    no_glove: Annotated[bool, typer.Option("--no-glove", help="Start the word embedding from random vectors.")] = False,
    sentiment_aware: Annotated[
        bool,
        typer.Option(
            "--sentiment-aware/--pixels-only",
            help="Emoji features: VAE code + sentiment prior, or the VAE code alone.",
        ),
    ] = True,
    epochs: Annotated[int, typer.Option(min=1)] = 10,
    batch_size: Annotated[int, typer.Option(min=2, help="Tweets per batch.")] = 32,
    lr: Annotated[float, typer.Option(min=0.0)] = 1e-3,
    margin: Annotated[float, typer.Option(min=0.0)] = 0.2,
    test_fraction: Annotated[
        float, typer.Option(min=0.05, max=0.9, help="Share of tweets held out for the test report.")
    ] = 0.2,
    val_fraction: Annotated[
        float,
        typer.Option(
            min=0.01,
            max=0.5,
            help="Share of tweets held out for validation (per-epoch accuracy; the best epoch with --average-from 0).",
        ),
    ] = 0.08,
    limit: Annotated[Optional[int], typer.Option(min=30, help="Use only the first N tweets (quick runs).")] = None,
    min_frequency: Annotated[
        int, typer.Option(min=1, help="Keep words seen at least this often in training tweets.")
    ] = 2,
    word_dropout: Annotated[
        float, typer.Option(min=0.0, max=0.9, help="Share of training words replaced by [UNK] (regulariser).")
    ] = 0.1,
    sentiment_weight: Annotated[
        float, typer.Option(min=0.0, help="Weight of the all-emoji sentiment triplets (sentiment-aware models).")
    ] = 0.3,
    average_from: Annotated[
        int,
        typer.Option(
            min=0, help="Average the weights of this epoch and later ones (0: keep the best epoch on validation)."
        ),
    ] = 6,
    seed: int = 0,
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Train the text→emoji Siamese model on sentiment-labelled tweets (🎉 / 😈 / 😡) and report
    its held-out accuracy beside the majority class and TF-IDF + logistic regression."""
    check_out_folder(out, overwrite, inputs=[vae_dir, data])
    from ..data.datasets import data_root
    from ..emoji.images import load_emojis
    from ..emoji.text_model import TextEmojiConfig
    from ..emoji.text_model_eval import data_record, train_and_evaluate
    from ..emoji.text_model_train import TextEmojiTrainConfig
    from ..emoji.tweets import default_tweets, read_tweets
    from ..emoji.vae import EmojiVAE

    tweets = read_tweets(data)
    if limit:
        tweets = tweets.subset(range(min(limit, len(tweets))))
    vae = EmojiVAE.load(vae_dir, device=device)
    emojis = load_emojis(images)
    glove_path = None if no_glove else (glove or data_root() / "glove" / "glove-50d-5k.json")
    model, result = train_and_evaluate(
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
        glove_path=glove_path,
        test_fraction=test_fraction,
        val_fraction=val_fraction,
        text_encoder=text_encoder,
        data=data_record(
            data or default_tweets(), seed=seed, test_fraction=test_fraction, val_fraction=val_fraction, limit=limit
        ),
        progress=not quiet,
    )
    model.save(out, overwrite=overwrite)
    result = {"out": str(out)} | result
    report, baselines = result["test"], result["baselines"]
    averaged = result["averaged_epochs"]
    kept = (
        f"weights averaged over epochs {averaged[0]}–{averaged[1]}"
        if averaged
        else f"best epoch {result['best_epoch']}"
    )
    emit(
        result,
        as_json,
        [
            f"trained on {result['train_tweets']} tweets ({text_encoder}{', fine-tuned' if fine_tune else ''}) for "
            f"{len(result['history'])} epochs in {result['seconds']:.1f}s; {kept} (validation accuracy "
            f"{result['val_accuracy']:.4f})",
            f"softmax temperatures fitted on the validation tweets: {result['calibration']['temperature']:.4f} "
            "(3-way sentiment), "
            f"{result['calibration']['suggestions']['temperature']:.4f} (suggestions over all {len(model.names)} "
            "emojis)",
            *_report_lines(f"held-out test ({report['n']} tweets)", report, baselines, len(model.names)),
            f"saved to {out}",
        ],
    )


def _report_lines(title: str, report: dict, baselines: dict, emojis: int) -> list[str]:
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


@emoji_app.command("evaluate")
@user_errors
def evaluate(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (from siamese emoji train).")],
    data: Annotated[
        Optional[Path],
        typer.Option(
            "--data",
            help=(
                "Labelled tweets CSV ('text', 'airline_sentiment'); default: the model's own file, whose held-out "
                "test split is scored."
            ),
        ),
    ] = None,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """3-way accuracy, per-class recall, confusion matrix and top-5 sentiment agreement of a model
    on labelled tweets, beside the majority class and TF-IDF + LR trained on the model's training tweets."""
    from ..emoji.text_model_eval import evaluate_file

    result = evaluate_file(model_dir, data, device=device)
    emit(
        result,
        as_json,
        [
            f"{result['data']}: {result['scored']}",
            *_report_lines(f"{result['n']} tweets", result, result["baselines"], result["emojis"]),
        ],
    )


@emoji_app.command("suggest")
@user_errors
def suggest(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (from siamese emoji train).")],
    text: Annotated[str, typer.Argument(help="The text to answer with emojis.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many emojis.")] = 5,
    png: Annotated[
        Optional[Path], typer.Option("--png", help="Also draw the top-k emojis with their scores into this PNG.")
    ] = None,
    generated: Annotated[
        int, typer.Option(min=0, help="Also rank this many new emojis decoded from Gaussian samples (needs --vae).")
    ] = 0,
    vae_dir: Annotated[
        Optional[Path], typer.Option("--vae", help="VAE folder, to rank and draw generated emojis.")
    ] = None,
    images: ImagesOpt = None,
    seed: int = 0,
    device: DeviceOpt = "auto",
    as_json: JsonOpt = False,
):
    """Rank all known emojis (and optionally generated ones) for a text."""
    from ..emoji.suggest import suggest_emojis
    from ..io.atomic import check_not_input

    if png is not None:
        check_not_input(png, [model_dir, vae_dir, images])

    suggestions, sentiment = suggest_emojis(
        model_dir, text, k=k, generated=generated, vae_dir=vae_dir, images=images, png=png, seed=seed, device=device
    )
    result = {"text": text, "sentiment": sentiment, "suggestions": suggestions} | ({"png": str(png)} if png else {})
    header = ["sentiment: " + ", ".join(f"{label} {p:.0%}" for label, p in sentiment.items())] if sentiment else []
    emit(
        result,
        as_json,
        header
        + [
            ("" if s["probability"] is None else f"{s['probability']:7.2%}  ")
            + f"cos {s['score']:+.3f}  {s['char']}  {s['label']}"
            for s in suggestions
        ]
        + ([f"wrote {png}"] if png else []),
    )
