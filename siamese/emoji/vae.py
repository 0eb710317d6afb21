"""A convolutional variational autoencoder over 36×36×4 emoji images.

Encoder: three Conv2D(filters, 3×3, same, relu) → flatten → a variational layer giving the mean
and log-variance of a ``latent_dim``-d Gaussian. Decoder: Dense(36·36·4, relu) → reshape → three
ConvTranspose2D(filters, 3×3, same, relu) → dropout → ConvTranspose2D(4, 3×3, same, sigmoid).

Why the codes stay finite (an unbounded log-variance gave ``inf`` for ~4 % of emojis): an emoji's code is the
Gaussian's *mean*, not a sample, and the log-variance is bounded smoothly (``tanh``), so
``exp(log_var / 2)`` can never overflow while training samples the latent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .folder import load_weights, read_config, save_folder
from .images import IMAGE_SHAPE

FORMAT = "siamese-emoji-vae/1"


@dataclass
class VAEConfig:
    """Architecture; saved in ``config.json``."""

    latent_dim: int = 16
    filters: int = 64
    dropout: float = 0.8  # the share of decoder units dropped (as Keras' Dropout(.8))
    max_log_var: float = 10.0  # |log-variance| bound: exp(10 / 2) ≈ 148 standard deviations at most


class ConvVAE(nn.Module):
    def __init__(self, config: VAEConfig):
        super().__init__()
        height, width, channels = IMAGE_SHAPE
        f = config.filters
        self.config = config
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, f, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(f, f, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(f, f, 3, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.variational = nn.Linear(f * height * width, 2 * config.latent_dim)  # mean and log-variance
        self.upsample = nn.Sequential(
            nn.Linear(config.latent_dim, height * width * channels),
            nn.ReLU(),
            nn.Unflatten(1, (channels, height, width)),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(channels, f, 3, padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(f, f, 3, padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(f, f, 3, padding=1),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.ConvTranspose2d(f, channels, 3, padding=1),  # logits; the sigmoid is applied in decode()
        )

    def encode(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``images`` (n, 4, 36, 36) → (mean, log_var), each (n, latent_dim)."""
        mean, raw_log_var = self.variational(self.encoder(images)).chunk(2, dim=-1)
        bound = self.config.max_log_var
        return mean, bound * torch.tanh(raw_log_var / bound)

    def decode_logits(self, codes: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.upsample(codes))

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reconstruction logits from a reparameterised sample, with the Gaussian's parameters."""
        mean, log_var = self.encode(images)
        codes = mean + torch.exp(0.5 * log_var) * torch.randn_like(mean)
        return self.decode_logits(codes), mean, log_var


def vae_loss(images: torch.Tensor, logits: torch.Tensor, mean: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """Per-image loss, averaged over the batch: binary cross-entropy summed over the 36×36 pixels
    (averaged over a pixel's 4 channels, as Keras' ``binary_crossentropy`` does) plus
    the KL divergence from the unit Gaussian. Computed from logits, which is stable near 0 and 1."""
    bce = F.binary_cross_entropy_with_logits(logits, images, reduction="none").mean(dim=1).sum(dim=(1, 2))
    kl = -0.5 * (1 + log_var - mean.square() - log_var.exp()).sum(dim=-1)
    return (bce + kl).mean()


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """(n, 36, 36, 4) arrays → (n, 4, 36, 36) float32 tensor."""
    return torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)).permute(0, 3, 1, 2)


class EmojiVAE:
    """A trained VAE with numpy in and out: images → codes, codes → images."""

    def __init__(self, module: ConvVAE, info: dict | None = None):
        self.module = module.eval()
        self.config = module.config
        self.info = dict(info or {})
        self.device = next(module.parameters()).device

    def to(self, device: str | torch.device | None = "auto") -> EmojiVAE:
        """Run on ``device`` (auto: a GPU when there is one)."""
        from ..runtime.devices import resolve_device

        self.device = resolve_device(device)
        self.module.to(self.device)
        return self

    @torch.inference_mode()
    def encode(self, images: np.ndarray, *, batch_size: int = 128) -> np.ndarray:
        """The Gaussian mean of each image: (n, latent_dim) float32."""
        self.module.eval()
        parts = [
            self.module.encode(to_tensor(images[i : i + batch_size]).to(self.device))[0]
            for i in range(0, len(images), batch_size)
        ]
        return torch.cat(parts).cpu().numpy() if parts else np.zeros((0, self.config.latent_dim), np.float32)

    @torch.inference_mode()
    def decode(self, codes: np.ndarray, *, batch_size: int = 128) -> np.ndarray:
        """Codes (n, latent_dim) → images (n, 36, 36, 4) in [0, 1]."""
        self.module.eval()
        codes = torch.as_tensor(np.asarray(codes, dtype=np.float32), device=self.device)
        parts = [
            torch.sigmoid(self.module.decode_logits(codes[i : i + batch_size]))
            for i in range(0, len(codes), batch_size)
        ]
        return torch.cat(parts).permute(0, 2, 3, 1).cpu().numpy()

    def reconstruct(self, images: np.ndarray) -> np.ndarray:
        return self.decode(self.encode(images))

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        return save_folder(
            path, fmt=FORMAT, config=self.config, module=self.module, info=self.info, overwrite=overwrite
        )

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | torch.device | None = "auto") -> EmojiVAE:
        config, raw = read_config(path, fmt=FORMAT, config_class=VAEConfig, what="emoji VAE")
        return cls(load_weights(path, ConvVAE(config)), raw.get("info")).to(device)
