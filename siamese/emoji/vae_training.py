"""Train the emoji VAE: an 80/20 train/validation split, Adam, batch 16, both losses each epoch,
the weights of the best validation epoch kept."""

from __future__ import annotations

import copy
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..errors import ConfigError
from ..progress import tqdm
from .images import EmojiSet
from .vae import ConvVAE, EmojiVAE, VAEConfig, to_tensor, vae_loss


@dataclass
class VAETrainConfig:
    """Optimisation hyper-parameters: the seed's batch and split; a lower learning rate than its
    0.003, at which this model collapsed to one blurred emoji for every input (val loss 758 after
    30 epochs, against 564 after 13 at 0.001; docs/benchmarks.md); fewer epochs than its 100."""

    epochs: int = 15
    batch_size: int = 16
    lr: float = 0.001
    val_fraction: float = 0.2
    seed: int = 0


def split_rows(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train rows, validation rows), sorted within each part."""
    if not 0 < val_fraction < 1:
        raise ConfigError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, round(n * val_fraction))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def _epoch_loss(module: ConvVAE, images: torch.Tensor, batch_size: int, optimizer=None, order=None) -> float:
    """Mean per-image loss over ``images``; a training pass when an optimizer is given."""
    order = torch.arange(len(images)) if order is None else order
    total = 0.0
    for start in range(0, len(images), batch_size):
        batch = images[order[start : start + batch_size]]
        with torch.set_grad_enabled(optimizer is not None):
            loss = vae_loss(batch, *module(batch))
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        total += loss.item() * len(batch)
    return total / len(images)


def train_vae(emojis: EmojiSet, *, model_config: VAEConfig | None = None, config: VAETrainConfig | None = None,
              progress: bool = True) -> EmojiVAE:
    """Train on ``emojis`` and return the best-validation model; ``info["training"]`` holds the
    per-epoch losses, the split and the seconds per epoch."""
    model_config = model_config or VAEConfig()
    config = config or VAETrainConfig()
    if config.epochs < 1 or config.batch_size < 1:
        raise ConfigError("epochs and batch_size must be at least 1")
    torch.manual_seed(config.seed)
    train_rows, val_rows = split_rows(len(emojis), config.val_fraction, config.seed)
    train_images, val_images = to_tensor(emojis.images[train_rows]), to_tensor(emojis.images[val_rows])
    module = ConvVAE(model_config)
    optimizer = torch.optim.Adam(module.parameters(), lr=config.lr)
    shuffler = torch.Generator().manual_seed(config.seed)
    history, best_state, best_val = [], None, float("inf")
    started = time.perf_counter()
    for epoch in tqdm(range(1, config.epochs + 1), desc="train-vae", unit="epoch", disable=not progress):
        epoch_start = time.perf_counter()
        module.train()
        loss = _epoch_loss(module, train_images, config.batch_size, optimizer,
                           torch.randperm(len(train_images), generator=shuffler))
        module.eval()
        val_loss = _epoch_loss(module, val_images, 256)  # samples the latent, like Keras' val_loss
        history.append({"epoch": epoch, "loss": loss, "val_loss": val_loss, "seconds": time.perf_counter() - epoch_start})
        if progress:
            tqdm.write(f"epoch {epoch}: loss {loss:.2f}  val_loss {val_loss:.2f}  ({history[-1]['seconds']:.1f}s)", file=sys.stderr)
        if val_loss < best_val:
            best_val, best_state = val_loss, copy.deepcopy(module.state_dict())
    seconds = time.perf_counter() - started
    module.load_state_dict(best_state)
    best = min(history, key=lambda h: h["val_loss"])
    info = {"training": {
        "config": asdict(config), "history": history, "best_epoch": best["epoch"], "val_loss": best["val_loss"],
        "train_images": len(train_rows), "val_images": len(val_rows), "val_names": [emojis.names[i] for i in val_rows],
        "seconds": seconds, "seconds_per_epoch": seconds / config.epochs,
    }}
    return EmojiVAE(module, info)
