"""SiameseModel = vectorizer + shared encoder + head + decision threshold; save/load a model folder.

A model folder holds ``config.json`` (everything needed to rebuild the model), ``tokenizer.json``
and ``model.safetensors``. :meth:`SiameseModel.load` needs nothing else and never unpickles.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from . import __version__
from .atomic import atomic_dir
from .encoders import build_encoder
from .errors import ModelError
from .heads import HEADS
from .manifest import read_manifest
from .parallel import ParallelEncoder, single_threaded_ops
from .text import Vectorizer, pad

FORMAT = "siamese-model/1"


@dataclass
class ModelConfig:
    """Architecture and text hyper-parameters; saved as ``config.json``."""

    encoder: str = "lstm"
    dim: int = 128  # embedding width = LSTM units, as in the seed
    head: str = "cosine"
    threshold: float = 0.7  # replaced by the one chosen on validation data when training
    lowercase: bool = True
    max_vocab: int | None = 50_000
    min_frequency: int = 1
    max_length: int | None = 128
    seed: int = 0

    def encoder_options(self) -> dict:
        return {"dim": self.dim}


class SiameseModel:
    """A trained (or freshly built) Siamese text model."""

    def __init__(self, vectorizer: Vectorizer, encoder: torch.nn.Module, config: ModelConfig, info: dict | None = None):
        if config.head not in HEADS:
            raise ModelError(f"unknown head {config.head!r}; choose one of: {', '.join(HEADS)}")
        self.vectorizer = vectorizer
        self.encoder = encoder
        self.config = config
        self.info = dict(info or {})  # training summary etc., saved beside the config
        self.path: Path | None = None  # the folder it was loaded from or saved to

    @classmethod
    def build(cls, texts: Iterable[str], config: ModelConfig | None = None) -> SiameseModel:
        """Learn the vocabulary from ``texts`` and build an untrained encoder."""
        config = config or ModelConfig()
        torch.manual_seed(config.seed)
        vectorizer = Vectorizer.fit(
            texts,
            max_vocab=config.max_vocab,
            min_frequency=config.min_frequency,
            lowercase=config.lowercase,
            max_length=config.max_length,
        )
        encoder = build_encoder(config.encoder, vectorizer.vocab_size, **config.encoder_options())
        return cls(vectorizer, encoder, config)

    @property
    def threshold(self) -> float:
        return self.config.threshold

    # -- inference ---------------------------------------------------------------------------

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], *, batch_size: int = 512, progress: bool = False) -> np.ndarray:
        """Unit vectors, one row per text (float32). Texts are length-sorted into batches."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        self.encoder.eval()
        runner = self._runner()
        out = np.empty((len(texts), self.config.dim), dtype=np.float32)
        chunk = 1 << 16  # tokenize in chunks so a million texts never sit as ids all at once
        bar = tqdm(total=len(texts), desc="encode", unit="text", disable=not progress)
        with single_threaded_ops(runner.workers > 1):
            for start in range(0, len(texts), chunk):
                ids = self.vectorizer.encode(texts[start : start + chunk])
                order = np.argsort([len(s) for s in ids], kind="stable")
                for b in range(0, len(order), batch_size):
                    rows = order[b : b + batch_size]
                    batch, lengths = pad([ids[i] for i in rows])
                    vectors = runner(torch.from_numpy(batch), torch.from_numpy(lengths))
                    out[start + rows] = vectors.numpy()
                    bar.update(len(rows))
        bar.close()
        return out

    def _runner(self) -> ParallelEncoder:
        """Batches are split into length groups encoded on one thread per core."""
        if getattr(self, "_parallel", None) is None or self._parallel.encoder is not self.encoder:
            self._parallel = ParallelEncoder(self.encoder)
        return self._parallel

    def similarity(self, texts_a: Sequence[str], texts_b: Sequence[str], *, batch_size: int = 512) -> np.ndarray:
        """Head score per pair (cosine by default), in [-1, 1]."""
        texts_a = [texts_a] if isinstance(texts_a, str) else list(texts_a)
        texts_b = [texts_b] if isinstance(texts_b, str) else list(texts_b)
        if len(texts_a) != len(texts_b):
            raise ValueError(f"texts_a has {len(texts_a)} texts but texts_b has {len(texts_b)}")
        a = torch.from_numpy(self.encode(texts_a, batch_size=batch_size))
        b = torch.from_numpy(self.encode(texts_b, batch_size=batch_size))
        return HEADS[self.config.head](a, b).numpy()

    def predict(self, texts_a: Sequence[str], texts_b: Sequence[str], *, threshold: float | None = None) -> np.ndarray:
        """True where a pair is a duplicate: similarity above the threshold."""
        t = self.threshold if threshold is None else threshold
        return self.similarity(texts_a, texts_b) > t

    def fingerprint(self) -> str:
        """SHA-256 of the weights, vocabulary and architecture: what an index records to know its model."""
        h = hashlib.sha256()
        h.update(json.dumps({k: v for k, v in asdict(self.config).items() if k != "threshold"}, sort_keys=True).encode())
        h.update(self.vectorizer.tokenizer.to_str().encode())
        for name, tensor in sorted(self.encoder.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().contiguous().numpy().tobytes())
        return h.hexdigest()

    # -- persistence -------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model folder atomically (a temporary folder renamed into place)."""
        path = Path(path)
        with atomic_dir(path) as tmp:
            config = {
                "format": FORMAT,
                "siamese_version": __version__,
                "vocab_size": self.vectorizer.vocab_size,
                **asdict(self.config),
                "info": self.info,
            }
            (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            self.vectorizer.save(tmp / "tokenizer.json")
            state = {k: v.detach().contiguous() for k, v in self.encoder.state_dict().items()}
            save_file(state, str(tmp / "model.safetensors"), metadata={"format": FORMAT})
        self.path = path.resolve()
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> SiameseModel:
        path = Path(path)
        config_file = path / "config.json"
        raw = read_manifest(path, "config.json", FORMAT, ModelError, "model")
        known = {f.name for f in fields(ModelConfig)}
        config = ModelConfig(**{k: v for k, v in raw.items() if k in known})
        for name in ("tokenizer.json", "model.safetensors"):
            if not (path / name).is_file():
                raise ModelError(f"{path}: model folder is missing {name}")
        vectorizer = Vectorizer.load(path / "tokenizer.json")
        try:
            encoder = build_encoder(config.encoder, int(raw["vocab_size"]), **config.encoder_options())
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"{config_file}: missing or invalid field ({e!r})") from None
        try:
            encoder.load_state_dict(load_file(str(path / "model.safetensors")))
        except (RuntimeError, OSError, SafetensorError) as e:
            raise ModelError(f"{path / 'model.safetensors'}: weights do not fit the config ({str(e).splitlines()[0]})") from None
        encoder.eval()
        model = cls(vectorizer, encoder, config, raw.get("info"))
        model.path = path.resolve()
        return model
