"""Train the emoji VAE: an 80/20 train/validation split, Adam, batch 16, both losses each epoch,
the weights of the best validation epoch kept."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..errors import ConfigError
from ..runtime.devices import resolve_device
from ..training.loop import Trainer
from .images import EmojiSet
from .vae import ConvVAE, EmojiVAE, VAEConfig, to_tensor, vae_loss


@dataclass
class VAETrainConfig:
    """Optimisation hyper-parameters. The learning rate is 0.001: at 0.003 this model collapsed to one
    blurred emoji for every input (val loss 758 after 30 epochs, against 564 after 13 at 0.001;
    docs/benchmarks.md)."""

    epochs: int = 15
    batch_size: int = 16
    lr: float = 0.001
    val_fraction: float = 0.2
    seed: int = 0
    device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, cuda:N, mps


def split_rows(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train rows, validation rows), sorted within each part."""
    if not 0 < val_fraction < 1:
        raise ConfigError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, round(n * val_fraction))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def _mean_loss(module: ConvVAE, images: torch.Tensor, batch_size: int = 256) -> float:
    """Mean per-image loss over ``images``, without gradients (samples the latent, like Keras' val_loss)."""
    module.eval()
    with torch.no_grad():
        total = sum(vae_loss(batch, *module(batch)).item() * len(batch) for batch in images.split(batch_size))
    return total / len(images)


def train_vae(
    emojis: EmojiSet,
    *,
    model_config: VAEConfig | None = None,
    config: VAETrainConfig | None = None,
    progress: bool = True,
) -> EmojiVAE:
    """Train on ``emojis`` and return the best-validation model; ``info["training"]`` holds the
    per-epoch losses, the split and the seconds per epoch."""
    model_config = model_config or VAEConfig()
    config = config or VAETrainConfig()
    if config.epochs < 1 or config.batch_size < 1:
        raise ConfigError("epochs and batch_size must be at least 1")
    torch.manual_seed(config.seed)
    train_rows, val_rows = split_rows(len(emojis), config.val_fraction, config.seed)
    device = resolve_device(config.device)
    # a few hundred 36x36 images: all of them on the device at once
    train_images = to_tensor(emojis.images[train_rows]).to(device)
    val_images = to_tensor(emojis.images[val_rows]).to(device)
    module = ConvVAE(model_config).to(device)
    optimizer = torch.optim.Adam(module.parameters(), lr=config.lr)
    trainer = Trainer(
        module,
        [optimizer],
        epochs=config.epochs,
        rng=np.random.default_rng(config.seed),
        progress=progress,
        desc="train-vae epoch",
        item="image",
    )

    def plan(rng: np.random.Generator) -> list[torch.Tensor]:
        order = torch.from_numpy(rng.permutation(len(train_images)))
        return [train_images[rows] for rows in order.split(config.batch_size)]

    started = time.perf_counter()
    fitted = trainer.fit(
        plan, lambda batch: vae_loss(batch, *module(batch)), validate=lambda: _mean_loss(module, val_images)
    )
    seconds = time.perf_counter() - started
    module.load_state_dict(fitted.best_weights)
    module.eval()
    best = fitted.history[fitted.best_epoch - 1]
    info = {
        "training": {
            "config": asdict(config),
            "history": fitted.history,
            "best_epoch": fitted.best_epoch,
            "val_loss": best["val_loss"],
            "train_images": len(train_rows),
            "val_images": len(val_rows),
            "val_names": [emojis.names[i] for i in val_rows],
            "seconds": seconds,
            "seconds_per_epoch": seconds / config.epochs,
        }
    }
    return EmojiVAE(module, info)
