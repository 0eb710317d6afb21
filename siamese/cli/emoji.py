"""``siamese emoji …``: train the emoji VAE, encode and generate emojis, train the text→emoji
model and suggest emojis for a text. Errors and ``--json`` behave as in the main commands.

Each command parses its options, calls its function of siamese/emoji/files.py
(the same keywords, whose defaults are the options' defaults) and prints the report."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..emoji.files import (
    encode_files,
    evaluate_files,
    generate_files,
    suggest_files,
    train_files,
    train_vae_files,
)
from .common import DeviceOpt, JsonOpt, OverwriteFileOpt, OverwriteOpt, emit, user_errors

# mounted as `siamese emoji` by siamese/cli/root.py (this module does not import the app: no cycle)
emoji_app = typer.Typer(no_args_is_help=True, help="Emoji VAE and text→emoji Siamese model.")

ImagesOpt = Annotated[
    Optional[Path], typer.Option("--images", help="Folder of 36x36 emoji PNGs (default: the shared Twemoji set).")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _defaults(function) -> dict[str, Any]:
    """The keyword defaults of a library function: the options' defaults are declared there, once."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items() if p.default is not p.empty}


_VAE = _defaults(train_vae_files)
_TRAIN = _defaults(train_files)
_SUGGEST = _defaults(suggest_files)
_GENERATE = _defaults(generate_files)


@emoji_app.command("train-vae")
@user_errors
def train_vae(
    out: Annotated[Path, typer.Option("--out", help="VAE folder to write (only written if training succeeds).")],
    images: ImagesOpt = None,
    epochs: Annotated[int, typer.Option(min=1)] = _VAE["epochs"],
    batch_size: Annotated[int, typer.Option(min=1)] = _VAE["batch_size"],
    lr: Annotated[
        float, typer.Option(min=0.0, help="Adam learning rate (0.003 collapses to one blurred emoji).")
    ] = _VAE["lr"],
    filters: Annotated[int, typer.Option(min=1, help="Channels of every convolution.")] = _VAE["filters"],
    latent_dim: Annotated[int, typer.Option(min=4, help="Size of an emoji's code.")] = _VAE["latent_dim"],
    dropout: Annotated[float, typer.Option(min=0.0, max=0.95, help="Share of decoder units dropped.")] = _VAE[
        "dropout"
    ],
    val_fraction: Annotated[float, typer.Option(min=0.01, max=0.9)] = _VAE["val_fraction"],
    seed: int = _VAE["seed"],
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Train the convolutional VAE on emoji images (80/20 split); report both losses per epoch."""
    report = train_vae_files(
        out,
        images=images,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        filters=filters,
        latent_dim=latent_dim,
        dropout=dropout,
        val_fraction=val_fraction,
        seed=seed,
        device=device,
        overwrite=overwrite,
        progress=not quiet,
    )
    emit(report.result, as_json, report.lines)


@emoji_app.command("encode")
@user_errors
def encode(
    vae_dir: Annotated[Path, typer.Argument(help="VAE folder (from train-vae).")],
    out: Annotated[Path, typer.Option("--out", help="CSV to write: codepoints, char, z0 … z15.")],
    images: ImagesOpt = None,
    device: DeviceOpt = "auto",
    overwrite: OverwriteFileOpt = False,
    as_json: JsonOpt = False,
):
    """Encode every emoji image into its VAE code (the Gaussian's mean) and count inf/NaN codes."""
    report = encode_files(vae_dir, out, images=images, device=device, overwrite=overwrite)
    emit(report.result, as_json, report.lines)


@emoji_app.command("generate")
@user_errors
def generate(
    vae_dir: Annotated[Path, typer.Argument(help="VAE folder (from train-vae).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the PNG sheets (created if needed).")],
    samples: Annotated[int, typer.Option(min=0, help="Gaussian samples to decode (0 = none).")] = _GENERATE["samples"],
    patterns: Annotated[
        str, typer.Option(help="2-D grid patterns, comma-separated: A, B, C (empty = none).")
    ] = _GENERATE["patterns"],
    ticks: Annotated[int, typer.Option(min=2, help="Grid points per axis.")] = _GENERATE["ticks"],
    low: float = _GENERATE["low"],
    high: float = _GENERATE["high"],
    reconstructions: Annotated[
        int, typer.Option(min=0, help="Emojis shown beside their reconstructions (the VAE's validation emojis first).")
    ] = _GENERATE["reconstructions"],
    between: Annotated[
        Optional[str],
        typer.Option(help="Interpolate between two emojis: 'FROM,TO' as code points or characters, e.g. 1f389,1f621."),
    ] = None,
    steps: Annotated[int, typer.Option(min=2, help="Interpolation steps.")] = _GENERATE["steps"],
    scale: Annotated[int, typer.Option(min=1, max=8, help="Pixel scale of each emoji in the sheets.")] = _GENERATE[
        "scale"
    ],
    images: ImagesOpt = None,
    seed: int = _GENERATE["seed"],
    device: DeviceOpt = "auto",
    overwrite: OverwriteFileOpt = False,
    as_json: JsonOpt = False,
):
    """Decode Gaussian samples, 2-D grids, reconstructions and an interpolation to PNGs."""
    report = generate_files(
        vae_dir,
        out,
        samples=samples,
        patterns=patterns,
        ticks=ticks,
        low=low,
        high=high,
        reconstructions=reconstructions,
        between=between,
        steps=steps,
        scale=scale,
        images=images,
        seed=seed,
        device=device,
        overwrite=overwrite,
    )
    emit(report.result, as_json, report.lines)


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
                "The text side: mpnet (make mpnet), minilm, bilstm (from GloVe), "
                "student:FOLDER (siamese distill) or a model FOLDER."
            ),
        ),
    ] = _TRAIN["text_encoder"],
    fine_tune: Annotated[
        bool,
        typer.Option(
            "--fine-tune",
            help="Also train the sentence encoder (slow on a CPU; default: frozen, its vectors computed once).",
        ),
    ] = False,
    encoder_lr: Annotated[
        float, typer.Option(min=0.0, help="Learning rate of the sentence encoder with --fine-tune.")
    ] = _TRAIN["encoder_lr"],
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
    ] = _TRAIN["sentiment_aware"],
    epochs: Annotated[int, typer.Option(min=1)] = _TRAIN["epochs"],
    batch_size: Annotated[int, typer.Option(min=2, help="Tweets per batch.")] = _TRAIN["batch_size"],
    lr: Annotated[float, typer.Option(min=0.0)] = _TRAIN["lr"],
    margin: Annotated[float, typer.Option(min=0.0)] = _TRAIN["margin"],
    test_fraction: Annotated[
        float, typer.Option(min=0.05, max=0.9, help="Share of tweets held out for the test report.")
    ] = _TRAIN["test_fraction"],
    val_fraction: Annotated[
        float,
        typer.Option(
            min=0.01,
            max=0.5,
            help="Share of tweets held out for validation (per-epoch accuracy; the best epoch with --average-from 0).",
        ),
    ] = _TRAIN["val_fraction"],
    limit: Annotated[Optional[int], typer.Option(min=30, help="Use only the first N tweets (quick runs).")] = None,
    min_frequency: Annotated[
        int, typer.Option(min=1, help="Keep words seen at least this often in training tweets.")
    ] = _TRAIN["min_frequency"],
    word_dropout: Annotated[
        float, typer.Option(min=0.0, max=0.9, help="Share of training words replaced by [UNK] (regulariser).")
    ] = _TRAIN["word_dropout"],
    sentiment_weight: Annotated[
        float, typer.Option(min=0.0, help="Weight of the all-emoji sentiment triplets (sentiment-aware models).")
    ] = _TRAIN["sentiment_weight"],
    average_from: Annotated[
        int,
        typer.Option(
            min=0, help="Average the weights of this epoch and later ones (0: keep the best epoch on validation)."
        ),
    ] = _TRAIN["average_from"],
    seed: int = _TRAIN["seed"],
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Train the text→emoji Siamese model on sentiment-labelled tweets (🎉 / 😈 / 😡) and report
    its held-out accuracy beside the majority class and TF-IDF + logistic regression."""
    report = train_files(
        vae_dir,
        out,
        data=data,
        text_encoder=text_encoder,
        fine_tune=fine_tune,
        encoder_lr=encoder_lr,
        images=images,
        glove=glove,
        no_glove=no_glove,
        sentiment_aware=sentiment_aware,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        margin=margin,
        test_fraction=test_fraction,
        val_fraction=val_fraction,
        limit=limit,
        min_frequency=min_frequency,
        word_dropout=word_dropout,
        sentiment_weight=sentiment_weight,
        average_from=average_from,
        seed=seed,
        device=device,
        overwrite=overwrite,
        progress=not quiet,
    )
    emit(report.result, as_json, report.lines)


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
    report = evaluate_files(model_dir, data=data, device=device)
    emit(report.result, as_json, report.lines)


@emoji_app.command("suggest")
@user_errors
def suggest(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (from siamese emoji train).")],
    text: Annotated[str, typer.Argument(help="The text to answer with emojis.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many emojis.")] = _SUGGEST["k"],
    png: Annotated[
        Optional[Path], typer.Option("--png", help="Also draw the top-k emojis with their scores into this PNG.")
    ] = None,
    generated: Annotated[
        int, typer.Option(min=0, help="Also rank this many new emojis decoded from Gaussian samples (needs --vae).")
    ] = _SUGGEST["generated"],
    vae_dir: Annotated[
        Optional[Path], typer.Option("--vae", help="VAE folder, to rank and draw generated emojis.")
    ] = None,
    images: ImagesOpt = None,
    seed: int = _SUGGEST["seed"],
    device: DeviceOpt = "auto",
    overwrite: OverwriteFileOpt = False,
    as_json: JsonOpt = False,
):
    """Rank all known emojis (and optionally generated ones) for a text."""
    report = suggest_files(
        model_dir,
        text,
        k=k,
        png=png,
        generated=generated,
        vae_dir=vae_dir,
        images=images,
        seed=seed,
        device=device,
        overwrite=overwrite,
    )
    emit(report.result, as_json, report.lines)
