"""The text→emoji Siamese model (after the answer-selection model of Feng et al. 2015).

Text side: an Embedding (GloVe-initialised) → BiLSTM(50, all steps) → max-pool →
Dense(10, relu), or a sentence encoder of the zoo (see :mod:`.text_encoders`; frozen or
fine-tuned) → Dropout → Dense(256, relu) → Dense(10, relu).
Emoji side: the emoji's features → Dense(64, relu) → Dense(10, relu). Both then go through the
same Dense(100, relu) → Dense(50, relu) → Dense(10, tanh); the score is their cosine; a softmax at
a temperature fitted on validation tweets (see :mod:`.temperature`) turns the cosines into probabilities.

An emoji's features are its standardised VAE code, plus, in a *sentiment-aware* model, its
sentiment prior (see :mod:`.sentiment`). The model keeps the features of every emoji it knows
(all 874 by default) so it can rank any of them, and which three answer the trained sentiments.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..data.vocabulary import Vectorizer, pad
from ..errors import ModelError
from ..models.encoders import BiLSTMMaxEncoder
from ..models.siamese import SiameseModel
from . import text_encoders
from .folder import load_weights, read_config, save_folder
from .temperature import probabilities
from .tweets import SENTIMENTS

FORMAT = "siamese-emoji-sqam/1"


@dataclass
class TextEmojiConfig:
    """Architecture and text hyper-parameters; saved in ``config.json``."""

    embedding_dim: int = 50  # GloVe 50-d
    lstm_units: int = 50
    text_dense: int = 10
    emoji_hidden: int = 64
    emoji_dense: int = 10
    shared: tuple[int, ...] = (100, 50, 10)
    code_dim: int = 16
    sentiment_aware: bool = False
    max_vocab: int = 10_000
    min_frequency: int = 2  # words seen once in training are [UNK]
    lowercase: bool = True
    max_length: int = 64
    # "bilstm" (above), a named frozen encoder ("minilm", "mpnet") reloaded from its
    # package, or "text_encoder" (the encoder saved in that subfolder: any other, or fine-tuned).
    text_encoder: str = text_encoders.BILSTM
    text_dim: int = 0  # width of the sentence encoder's vectors
    text_hidden: int = 256
    text_dropout: float = 0.3  # 0.1 → 0.3: +0.4 point of validation accuracy with mpnet (two splits)
    fine_tune: bool = False

    @property
    def uses_bilstm(self) -> bool:
        return self.text_encoder == text_encoders.BILSTM

    @property
    def feature_dim(self) -> int:
        return self.code_dim + (len(SENTIMENTS) if self.sentiment_aware else 0)


class TextEmojiNetwork(nn.Module):
    def __init__(self, config: TextEmojiConfig, vocab_size: int, n_emojis: int, embeddings=None):
        super().__init__()
        if config.uses_bilstm:
            self.text = BiLSTMMaxEncoder(
                vocab_size, config.embedding_dim, config.lstm_units, config.text_dense, embeddings, normalize=False
            )
        else:  # a projection of the sentence encoder's vectors
            self.text = nn.Sequential(
                nn.Dropout(config.text_dropout),
                nn.Linear(config.text_dim, config.text_hidden),
                nn.ReLU(),
                nn.Linear(config.text_hidden, config.text_dense),
                nn.ReLU(),
            )
        self.emoji = nn.Sequential(
            nn.Linear(config.feature_dim, config.emoji_hidden),
            nn.ReLU(),
            nn.Linear(config.emoji_hidden, config.emoji_dense),
            nn.ReLU(),
        )
        if config.text_dense != config.emoji_dense:
            raise ModelError("text_dense and emoji_dense must match: both sides share the layers after them")
        layers, width = [], config.text_dense
        for i, units in enumerate(config.shared):
            layers += [nn.Linear(width, units), nn.Tanh() if i == len(config.shared) - 1 else nn.ReLU()]
            width = units
        self.shared = nn.Sequential(*layers)
        # Every known emoji's features, the code standardisation, and the rows answering SENTIMENTS.
        self.register_buffer("emoji_features", torch.zeros(n_emojis, config.feature_dim))
        self.register_buffer("code_mean", torch.zeros(config.code_dim))
        self.register_buffer("code_std", torch.ones(config.code_dim))
        self.register_buffer("answers", torch.zeros(len(SENTIMENTS), dtype=torch.long))

    def embed_texts(self, *inputs: torch.Tensor) -> torch.Tensor:
        """(ids, lengths) for the BiLSTM, (vectors,) of the sentence encoder otherwise."""
        return self.shared(self.text(*inputs))

    def embed_features(self, features: torch.Tensor) -> torch.Tensor:
        return self.shared(self.emoji(features))


class TextEmojiModel:
    """A text→emoji model: vectorizer (BiLSTM) or sentence encoder + network + the names of the
    emojis it can rank."""

    def __init__(
        self,
        vectorizer: Vectorizer | None,
        network: TextEmojiNetwork,
        config: TextEmojiConfig,
        names: list[str],
        info: dict | None = None,
        *,
        encoder: SiameseModel | None = None,
    ):
        if (vectorizer is None) == (encoder is None):
            raise ModelError("an emoji model has either a vectorizer (bilstm) or a sentence encoder")
        self.vectorizer = vectorizer
        self.encoder = encoder
        self.network = network
        self.config = config
        self.names = list(names)
        self.info = dict(info or {})
        self.device = torch.device("cpu")  # the network's (and the sentence encoder's): see to()

    def to(self, device: str | torch.device | None = "auto") -> TextEmojiModel:
        """Run the network and the sentence encoder on ``device`` (auto: a GPU when there is one)."""
        from ..runtime.devices import resolve_device

        self.device = resolve_device(device)
        self.network.to(self.device)
        if self.encoder is not None:
            self.encoder.to(self.device)
        return self

    @property
    def temperature(self) -> float | None:
        """The softmax temperature fitted on validation tweets (None for models saved before it)."""
        return self.info.get("calibration", {}).get("temperature")

    @property
    def suggestion_temperature(self) -> float | None:
        """The temperature of the softmax over every known emoji (see :mod:`.temperature`)."""
        return self.info.get("calibration", {}).get("suggestions", {}).get("temperature")

    def suggestion_probabilities(self, scores: np.ndarray) -> np.ndarray:
        """Cosines (texts, emojis) → softmax over all those emojis at the suggestion temperature."""
        if self.suggestion_temperature is None:
            raise ModelError("this emoji model has no fitted suggestion temperature (retrain it with this version)")
        return probabilities(scores, self.suggestion_temperature)

    @property
    def answer_names(self) -> list[str]:
        return [self.names[i] for i in self.answer_rows()]

    def answer_rows(self) -> np.ndarray:
        """The rows of the emojis answering SENTIMENTS (on the host)."""
        return self.network.answers.cpu().numpy()

    def text_batch(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and lengths: the BiLSTM's vocabulary, or the sentence encoder's tokenizer."""
        vectorizer = self.vectorizer or self.encoder.vectorizer
        ids, lengths = pad(vectorizer.encode(texts), vectorizer.pad_id)
        return torch.from_numpy(ids).to(self.device), torch.from_numpy(lengths).to(self.device)

    def text_inputs(self, texts: list[str]) -> tuple[torch.Tensor, ...]:
        """What the network's text side takes for these texts."""
        if self.encoder is None:
            return self.text_batch(texts)
        return (torch.from_numpy(self.encoder.encode(texts)).to(self.device),)

    @torch.inference_mode()
    def embed_texts(self, texts: list[str], *, batch_size: int = 512) -> torch.Tensor:
        """Unit vectors of the texts in the shared space."""
        self.network.eval()
        parts = [
            self.network.embed_texts(*self.text_inputs(texts[i : i + batch_size]))
            for i in range(0, len(texts), batch_size)
        ]
        return F.normalize(torch.cat(parts), dim=-1)

    @torch.inference_mode()
    def embed_emojis(self, features: torch.Tensor | None = None) -> torch.Tensor:
        """Unit vectors of the known emojis (or of the given feature rows)."""
        self.network.eval()
        features = self.network.emoji_features if features is None else features
        return F.normalize(self.network.embed_features(features), dim=-1)

    def scores(self, texts: list[str], features: torch.Tensor | None = None) -> np.ndarray:
        """Cosine of each text with each known emoji (or feature row): (texts, emojis)."""
        return (self.embed_texts(texts) @ self.embed_emojis(features).T).cpu().numpy()

    def predict(self, texts: list[str]) -> np.ndarray:
        """Index into SENTIMENTS of the answer emoji with the highest cosine, per text."""
        return self.scores(texts)[:, self.answer_rows()].argmax(axis=1)

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        """Cosines (texts, answers) → softmax probabilities at the answer temperature (3-way sentiment)."""
        if self.temperature is None:
            raise ModelError("this emoji model has no fitted temperature (retrain it with this version)")
        return probabilities(scores, self.temperature)

    def code_features(self, codes: np.ndarray) -> torch.Tensor:
        """Features of new emojis from raw VAE codes (generated ones): no sentiment is known."""
        codes = torch.as_tensor(np.asarray(codes, dtype=np.float32), device=self.device)
        standardised = (codes - self.network.code_mean) / self.network.code_std
        unknown = codes.new_zeros(len(codes), self.config.feature_dim - self.config.code_dim)
        return torch.cat([standardised, unknown], dim=1)

    def suggest(self, text: str, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` known emojis closest to ``text``: (name, cosine), best first."""
        row = self.scores([text])[0]
        top = np.argsort(-row, kind="stable")[:k]
        return [(self.names[i], float(row[i])) for i in top]

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        def write_files(tmp: Path) -> None:
            if self.vectorizer is not None:
                self.vectorizer.save(tmp / "tokenizer.json")
            elif self.config.text_encoder == text_encoders.SUBFOLDER:
                self.encoder.save(tmp / text_encoders.SUBFOLDER)

        vocab_size = self.vectorizer.vocab_size if self.vectorizer is not None else 0
        return save_folder(
            path,
            fmt=FORMAT,
            config=self.config,
            module=self.network,
            info=self.info,
            extra={"vocab_size": vocab_size, "emojis": self.names},
            write_files=write_files,
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | torch.device | None = "auto") -> TextEmojiModel:
        path = Path(path)
        config, raw = read_config(path, fmt=FORMAT, config_class=TextEmojiConfig, what="emoji text model")
        names = raw.get("emojis")
        if not isinstance(names, list) or not isinstance(raw.get("vocab_size"), int):
            raise ModelError(f"{path / 'config.json'}: missing or invalid field 'emojis' or 'vocab_size'")
        vectorizer = encoder = None
        if config.uses_bilstm:
            if not (path / "tokenizer.json").is_file():
                raise ModelError(f"{path}: model folder is missing tokenizer.json")
            vectorizer = Vectorizer.load(path / "tokenizer.json")
        else:
            encoder = text_encoders.load_saved(path, config.text_encoder)
            if encoder.dim != config.text_dim:
                raise ModelError(
                    f"{path}: text encoder {config.text_encoder!r} gives {encoder.dim}-d vectors, "
                    f"the model expects {config.text_dim}-d"
                )
        network = load_weights(path, TextEmojiNetwork(config, raw["vocab_size"], len(names)))
        return cls(vectorizer, network, config, names, raw.get("info"), encoder=encoder).to(device)
