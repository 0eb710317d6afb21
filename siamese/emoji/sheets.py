"""Decoded emojis as PNG sheets: Gaussian samples, 2-D grids (code patterns A, B, C),
reconstructions beside originals, interpolations, and a strip of suggested emojis with scores.

Sheets are tiled with Pillow; the suggestion strip is drawn with matplotlib (it has captions).
Every PNG is written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..io.atomic import atomic_file
from ..io.extras import require

Image = require("emoji", "PIL.Image")

PATTERNS = ("A", "B", "C")


def pattern_code(pattern: str, first: float, second: float, dim: int = 16) -> np.ndarray:
    """A 2-D point spread over ``dim`` latent dimensions:
    A = first half ``first``, second half ``second``; B = alternating; C = pairs alternating."""
    if dim % 4:
        raise ConfigError(f"the grid patterns need a latent size divisible by 4, got {dim}")
    half, quarter = dim // 2, dim // 4
    if pattern == "A":
        values = half * [first] + half * [second]
    elif pattern == "B":
        values = half * [first, second]
    elif pattern == "C":
        values = quarter * [first, first, second, second]
    else:
        raise ConfigError(f"unknown grid pattern {pattern!r}; choose one of: {', '.join(PATTERNS)}")
    return np.array(values, dtype=np.float32)


def grid_codes(pattern: str, *, ticks: int = 20, low: float = -2.0, high: float = 2.0, dim: int = 16) -> np.ndarray:
    """``ticks × ticks`` codes, row by row: the first coordinate down, the second across."""
    axis = np.linspace(low, high, ticks)
    return np.stack([pattern_code(pattern, a, b, dim) for a in axis for b in axis])


def gaussian_codes(n: int, *, dim: int = 16, seed: int = 0) -> np.ndarray:
    """Samples from the VAE's prior, the unit Gaussian."""
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def interpolation_codes(start: np.ndarray, end: np.ndarray, steps: int) -> np.ndarray:
    """``steps`` codes on the straight line from ``start`` to ``end`` (both included)."""
    weights = np.linspace(0.0, 1.0, steps, dtype=np.float32)[:, None]
    return (1 - weights) * start[None, :] + weights * end[None, :]


def to_pil(image: np.ndarray, background=(255, 255, 255)) -> Image.Image:
    """A (36, 36, 4) array in [0, 1] composited onto an opaque background."""
    rgba = Image.fromarray(np.clip(np.rint(image * 255), 0, 255).astype(np.uint8), "RGBA")
    canvas = Image.new("RGBA", rgba.size, background + (255,))
    return Image.alpha_composite(canvas, rgba).convert("RGB")


def tile(images: np.ndarray, *, columns: int, scale: int = 1, padding: int = 2) -> Image.Image:
    """Images laid out row by row, ``columns`` per row, on a white sheet."""
    rows = -(-len(images) // columns)
    size = images.shape[1] * scale
    sheet = Image.new("RGB", (columns * (size + padding) + padding, rows * (size + padding) + padding), "white")
    for i, image in enumerate(images):
        tile_image = to_pil(image).resize((size, size), Image.Resampling.NEAREST)
        sheet.paste(
            tile_image, (padding + (i % columns) * (size + padding), padding + (i // columns) * (size + padding))
        )
    return sheet


def save_png(image: Image.Image, path: str | os.PathLike) -> Path:
    path = Path(path)
    with atomic_file(path) as tmp:
        image.save(tmp, format="PNG", optimize=True)
    return path


def save_sheet(images: np.ndarray, path: str | os.PathLike, *, columns: int, scale: int = 1) -> Path:
    return save_png(tile(images, columns=columns, scale=scale), path)


def side_by_side(originals: np.ndarray, reconstructions: np.ndarray) -> np.ndarray:
    """Interleave so each original is followed by its reconstruction (pairs fill a row)."""
    return np.stack([originals, reconstructions], axis=1).reshape(-1, *originals.shape[1:])


def save_strip(images: np.ndarray, captions: Sequence[str], path: str | os.PathLike, *, title: str = "") -> Path:
    """Suggested emojis in a row with a caption (name, score) under each, via matplotlib."""
    matplotlib = require("emoji", "matplotlib")
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(images), figsize=(1.3 * len(images), 1.9), squeeze=False)
    for ax, image, caption in zip(axes[0], images, captions):
        ax.imshow(to_pil(image))
        ax.set_xlabel(caption, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=8, wrap=True)
    fig.tight_layout()
    path = Path(path)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return path
