"""Emoji suggestions for a text: rank every emoji the model knows, optionally with new emojis
decoded from Gaussian samples of the VAE's latent space, and draw the top ones to a PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .images import emoji_label, load_emojis, name_to_char
from .sheets import gaussian_codes, save_strip
from .text_model import TextEmojiModel
from .tweets import SENTIMENTS
from .vae import EmojiVAE


def suggest_emojis(
    model_dir: Path,
    text: str,
    *,
    k: int = 5,
    generated: int = 0,
    vae_dir: Path | None = None,
    images: Path | None = None,
    png: Path | None = None,
    seed: int = 0,
    device: str = "auto",
) -> tuple[list[dict], dict | None]:
    """The top-``k`` emojis for ``text``: dicts with name (code points), char, label (the emoji's
    name), score (cosine), probability (softmax over every ranked emoji at the model's suggestion
    temperature; None for a model without one) and generated=True for new ones; and the text's
    calibrated 3-way sentiment probabilities (None for a model without a temperature)."""
    if generated and vae_dir is None:
        raise ConfigError("--generated needs --vae: the VAE decodes the new emojis")
    model = TextEmojiModel.load(model_dir, device=device)
    if not text.strip():
        raise ConfigError("the text is empty")
    scores = model.scores([text])[0]
    sentiment = None
    if model.temperature is not None:
        answers = model.probabilities(scores[model.answer_rows()][None])[0]
        sentiment = {label: float(p) for label, p in zip(SENTIMENTS, answers)}
    names, chars = list(model.names), [name_to_char(n) for n in model.names]
    vae = EmojiVAE.load(vae_dir, device=device) if vae_dir is not None else None
    codes = None
    if generated:
        if vae.config.latent_dim != model.config.code_dim:
            raise ConfigError(
                f"{vae_dir}: codes are {vae.config.latent_dim}-d but the model expects {model.config.code_dim}-d"
            )
        codes = gaussian_codes(generated, dim=vae.config.latent_dim, seed=seed)
        scores = np.concatenate([scores, model.scores([text], model.code_features(codes))[0]])
        names += [f"generated-{i}" for i in range(generated)]
        chars += ["(new)"] * generated
    top = np.argsort(-scores, kind="stable")[:k]
    chance = model.suggestion_probabilities(scores) if model.suggestion_temperature is not None else None
    labels = [emoji_label(n) if i < len(model.names) else "generated" for i, n in enumerate(names)]
    suggestions = [
        {
            "name": names[i],
            "char": chars[i],
            "label": labels[i],
            "score": float(scores[i]),
            "probability": None if chance is None else float(chance[i]),
        }
        | ({"generated": True} if i >= len(model.names) else {})
        for i in top
    ]
    if png is not None:
        known = load_emojis(images) if any(i < len(model.names) for i in top) else None
        pictures = np.stack(
            [
                known.images[known.find(names[i])]
                if i < len(model.names)
                else vae.decode(codes[i - len(model.names)][None])[0]
                for i in top
            ]
        )
        save_strip(
            pictures,
            [strip_caption(labels[i], scores[i], None if chance is None else chance[i]) for i in top],
            png,
            title=(f"{max(sentiment, key=sentiment.get)} {max(sentiment.values()):.0%} · " if sentiment else "")
            + text[:80],
        )
    return suggestions, sentiment


def strip_caption(label: str, score: float, probability: float | None) -> str:
    """Under an emoji in a strip: its name (wrapped), then its probability (or cosine)."""
    import textwrap

    value = f"{probability:.1%}" if probability is not None else f"cos {score:.3f}"
    return "\n".join(textwrap.wrap(label, 16)[:2] + [value])
