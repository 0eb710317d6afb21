"""The emoji images: 36×36 RGBA PNGs named by hex code points (``1f389.png`` is 🎉).

Images load as float32 arrays of shape (36, 36, 4) with values in [0, 1]. An emoji is named by
its code points joined with ``-`` (Twemoji's file names); :meth:`EmojiSet.find` also accepts the
character itself, with or without the emoji variation selector U+FE0F.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.datasets import data_root
from ..errors import DataError
from ..io.extras import require

Image = require("emoji", "PIL.Image")  # the extra `emoji`: one line if it is missing
UnidentifiedImageError = Image.UnidentifiedImageError

IMAGE_SHAPE = (36, 36, 4)
VARIATION_SELECTOR = "\ufe0f"
_NAME = re.compile(r"^[0-9a-f]{2,6}(-[0-9a-f]{2,6})*$")


def default_folder() -> Path:
    """``emoji/twemoji_36x36`` in the shared data folder (``$SIAMESE_DATA`` or ``../shared/data``)."""
    return data_root() / "emoji" / "twemoji_36x36"


def name_to_char(name: str) -> str:
    """``"1f1fa-1f1f8"`` → ``"🇺🇸"``."""
    return "".join(chr(int(point, 16)) for point in name.split("-"))


def char_to_name(char: str) -> str:
    """``"🇺🇸"`` → ``"1f1fa-1f1f8"`` (the variation selector is dropped, as in Twemoji v1 names)."""
    return "-".join(f"{ord(c):x}" for c in char if c != VARIATION_SELECTOR)


def emoji_label(name: str) -> str:
    """A readable name: ``"1f389"`` → ``"party popper"``, ``"1f1fa-1f1f8"`` → ``"flag US"``;
    sequences join their characters' names (joiners and selectors left out)."""
    points = [int(p, 16) for p in name.split("-")]
    if points and all(0x1F1E6 <= p <= 0x1F1FF for p in points):  # regional indicators spell a country code
        return "flag " + "".join(chr(ord("A") + p - 0x1F1E6) for p in points)
    words = [unicodedata.name(chr(p), "").lower() for p in points if p not in (0x200D, 0xFE0F, 0x20E3)]
    label = " ".join(w for w in words if w)
    return label or name


@dataclass
class EmojiSet:
    """Emoji names (sorted) and their images, row for row."""

    names: list[str]
    images: np.ndarray  # (n, 36, 36, 4) float32 in [0, 1]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def chars(self) -> list[str]:
        return [name_to_char(n) for n in self.names]

    def find(self, key: str) -> int:
        """Row of an emoji given its name (``1f389``, ``1f389.png``) or its character (🎉)."""
        key = key.strip().lower().removesuffix(".png")
        candidates = [key] if _NAME.match(key) else [char_to_name(key)]
        for name in candidates:
            if name in self._rows:
                return self._rows[name]
        raise DataError(f"unknown emoji {key!r}: give a code point name like 1f389 or the character itself")

    def subset(self, rows) -> EmojiSet:
        rows = np.asarray(rows)
        return EmojiSet([self.names[i] for i in rows], self.images[rows])

    @property
    def _rows(self) -> dict[str, int]:
        if getattr(self, "_row_of", None) is None:
            self._row_of = {name: i for i, name in enumerate(self.names)}
        return self._row_of


def load_image(path: Path) -> np.ndarray:
    """One PNG as a (36, 36, 4) float32 array in [0, 1]; other sizes are refused, other modes converted."""
    try:
        with Image.open(path) as image:
            if image.size != IMAGE_SHAPE[:2]:
                raise DataError(f"{path}: image is {image.size[0]}x{image.size[1]}, expected 36x36")
            pixels = np.asarray(image.convert("RGBA"), dtype=np.float32)
    except (UnidentifiedImageError, OSError) as e:
        raise DataError(f"{path}: not a readable PNG image ({e.__class__.__name__})") from None
    return pixels / 255.0


def load_emojis(folder: str | os.PathLike | None = None) -> EmojiSet:
    """Every ``<code points>.png`` in ``folder`` (default: the shared Twemoji set), sorted by name."""
    folder = Path(folder) if folder is not None else default_folder()
    if not folder.is_dir():
        raise DataError(
            f"{folder}: emoji folder not found (set SIAMESE_DATA to the folder holding the shared data sets)"
        )
    files = sorted(folder.glob("*.png"))
    if not files:
        raise DataError(f"{folder}: no .png emoji images in this folder")
    for file in files:
        if not _NAME.match(file.stem):
            raise DataError(f"{file}: file name is not hex code points joined by '-' (like 1f389.png)")
    images = np.stack([load_image(file) for file in files])
    return EmojiSet([file.stem for file in files], images)
