"""New emojis from the VAE's latent space, as PNG sheets: Gaussian samples, 2-D grids,
reconstructions beside originals, and an interpolation between two emojis."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..io.atomic import check_file_target
from .images import load_emojis
from .sheets import PATTERNS, gaussian_codes, grid_codes, interpolation_codes, save_sheet, side_by_side
from .vae import EmojiVAE


def write_sheets(
    vae: EmojiVAE,
    out: str | os.PathLike,
    *,
    samples: int = 100,
    patterns: tuple[str, ...] = PATTERNS,
    ticks: int = 20,
    low: float = -2.0,
    high: float = 2.0,
    reconstructions: int = 24,
    between: tuple[str, str] | None = None,
    steps: int = 12,
    scale: int = 1,
    images: str | os.PathLike | None = None,
    seed: int = 0,
    overwrite: bool = False,
) -> list[Path]:
    """Write the requested sheets into ``out``; every input is checked before anything is written, and a sheet
    already there is replaced only with ``overwrite``."""
    out = Path(out)
    dim = vae.config.latent_dim
    unknown = [p for p in patterns if p not in PATTERNS]
    if unknown:
        raise ConfigError(f"unknown grid pattern {unknown[0]!r}; choose from: {', '.join(PATTERNS)}")
    names = (
        ["samples.png"] * bool(samples)
        + [f"grid_{p}.png" for p in patterns]
        + ["reconstructions.png"] * bool(reconstructions)
        + ["interpolation.png"] * bool(between)
    )
    for name in names:
        check_file_target(out / name, overwrite=overwrite)
    emojis = load_emojis(images) if reconstructions or between else None
    ends = [emojis.find(key) for key in between] if between else None
    sheets: dict[str, tuple[np.ndarray, int]] = {}  # file name → (images, columns)
    if samples:
        sheets["samples.png"] = (
            vae.decode(gaussian_codes(samples, dim=dim, seed=seed)),
            int(np.ceil(np.sqrt(samples))),
        )
    for pattern in patterns:
        sheets[f"grid_{pattern}.png"] = (
            vae.decode(grid_codes(pattern, ticks=ticks, low=low, high=high, dim=dim)),
            ticks,
        )
    if reconstructions:
        # The VAE's validation emojis first: it never trained on them.
        held_out = [emojis.find(n) for n in vae.info.get("training", {}).get("val_names", []) if n in emojis.names]
        rows = list(dict.fromkeys(held_out + list(range(len(emojis)))))[:reconstructions]
        originals = emojis.images[rows]
        sheets["reconstructions.png"] = (side_by_side(originals, vae.reconstruct(originals)), 12)
    if ends:
        start, end = vae.encode(emojis.images[ends])
        path = vae.decode(interpolation_codes(start, end, steps))
        sheets["interpolation.png"] = (
            np.concatenate([emojis.images[ends[:1]], path, emojis.images[ends[1:]]]),
            steps + 2,
        )
    return [
        save_sheet(pictures, out / name, columns=columns, scale=scale) for name, (pictures, columns) in sheets.items()
    ]
