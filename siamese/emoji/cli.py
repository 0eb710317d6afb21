"""``siamese emoji …``: train the emoji VAE, encode and generate emojis, train the text→emoji
model and suggest emojis for a text. Errors and ``--json`` behave as in the main commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cli import JsonOpt, _emit, user_errors

emoji_app = typer.Typer(no_args_is_help=True, help="Emoji VAE and text→emoji Siamese model.")
ImagesOpt = Annotated[Optional[Path], typer.Option("--images", help="Folder of 36x36 emoji PNGs (default: the shared Twemoji set).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


@emoji_app.command("train-vae")
@user_errors
def train_vae(
    out: Annotated[Path, typer.Option("--out", help="VAE folder to write (only written if training succeeds).")],
    images: ImagesOpt = None,
    epochs: Annotated[int, typer.Option(min=1)] = 30,
    batch_size: Annotated[int, typer.Option(min=1)] = 16,
    lr: Annotated[float, typer.Option(min=0.0)] = 0.003,
    filters: Annotated[int, typer.Option(min=1, help="Channels of every convolution (the seed: 64).")] = 64,
    latent_dim: Annotated[int, typer.Option(min=4, help="Size of an emoji's code (the seed: 16).")] = 16,
    dropout: Annotated[float, typer.Option(min=0.0, max=0.95, help="Share of decoder units dropped (the seed: 0.8).")] = 0.8,
    val_fraction: Annotated[float, typer.Option(min=0.01, max=0.9)] = 0.2,
    seed: int = 0,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
):
    """Train the convolutional VAE on emoji images (80/20 split); report both losses per epoch."""
    import numpy as np

    from .images import load_emojis
    from .vae import VAEConfig
    from .vae_training import VAETrainConfig
    from .vae_training import train_vae as run_training

    emojis = load_emojis(images)
    vae = run_training(emojis, model_config=VAEConfig(latent_dim=latent_dim, filters=filters, dropout=dropout),
                       config=VAETrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, val_fraction=val_fraction, seed=seed),
                       progress=not quiet)
    codes = vae.encode(emojis.images)
    non_finite = int((~np.isfinite(codes)).any(axis=1).sum())
    vae.info["non_finite_codes"] = non_finite
    vae.save(out)
    info = vae.info["training"]
    result = {"out": str(out), "emojis": len(emojis), "train_images": info["train_images"], "val_images": info["val_images"],
              "history": info["history"], "best_epoch": info["best_epoch"], "val_loss": info["val_loss"],
              "non_finite_codes": non_finite, "seconds": info["seconds"], "seconds_per_epoch": info["seconds_per_epoch"]}
    lines = [f"epoch {h['epoch']:>3}: loss {h['loss']:.2f}  val_loss {h['val_loss']:.2f}  ({h['seconds']:.1f}s)" for h in info["history"]]
    lines += [f"best epoch {info['best_epoch']} (val_loss {info['val_loss']:.2f}); {non_finite} of {len(emojis)} codes inf/NaN",
              f"saved to {out}"]
    _emit(result, as_json, lines)

