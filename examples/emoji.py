"""Emoji (guide: docs/guides/emoji.md): the seed's convolutional VAE trained briefly on the 874
Twemoji images, then new emojis decoded from its code space into PNG sheets.

Run: python examples/emoji.py [EPOCHS] [OUT]   (default 2 epochs, runs/example-emoji)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from siamese import datasets


def siamese_command(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "siamese", *args], check=True)


def main(epochs: int = 2, out: str = "runs/example-emoji") -> None:
    images = datasets.data_root() / "emoji" / "twemoji_36x36"
    vae, sheets = Path(out) / "vae", Path(out) / "sheets"
    siamese_command(
        "emoji", "train-vae", "--images", str(images), "--out", str(vae), "--epochs", str(epochs), "-q", "--overwrite"
    )
    siamese_command("emoji", "generate", str(vae), "--images", str(images), "--out", str(sheets), "--samples", "16")
    print(f"PNG sheets in {sheets}: {', '.join(sorted(p.name for p in sheets.glob('*.png')))}")


if __name__ == "__main__":
    main(*(int(sys.argv[1]),) if len(sys.argv) > 1 else (), *sys.argv[2:3])
