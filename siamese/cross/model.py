"""A cross-encoder: both texts read at once by one transformer ([CLS] a [SEP] b [SEP]) and a
linear head on the mean of its token states → the logit that the pair is a duplicate (or, on graded data, its
similarity). Reading the pair together lets the model see word order and what differs between
the texts, which a bi-encoder (each text alone) cannot (PAWS: same words, another order).

It scores pairs only: it has no vectors, so ``encode``/``index``/``search``/``dedupe`` refuse it
and it verifies candidates found by a fast bi-encoder instead. The score is symmetric: the mean
of the logits of both orders, through a sigmoid, in [0, 1].

Folder: ``config.json`` (format ``siamese-cross/1``, the transformer's own config, threshold,
calibration, info), ``tokenizer.json``, ``model.safetensors`` (``transformer.*`` and ``head.*``).

With a *prior* (``CrossConfig(prior="mpnet")``) the logit is a frozen bi-encoder's cosine, scaled
and shifted by two numbers fitted on validation pairs, plus what the transformer reads in the pair:
the model starts as good as the bi-encoder (its head starts at zero) and learns only corrections
(word order, the one word that differs). The bi-encoder is saved in the folder's ``prior/``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import nn

from ..config.configs import ModelConfig
from ..data.pairs import PairsLike
from ..decision.calibrator import Calibrator
from ..decision.threshold import check_threshold, sigmoid
from ..errors import ConfigError, ModelError
from ..io.atomic import atomic_dir, atomic_file, naming
from ..io.extras import require
from ..io.manifest import read_manifest
from ..models.encoders.transformer import rebuild_transformer
from ..models.inputs import verdicts
from ..models.pretrained import model_folder, quiet_loading, require_safetensors
from ..models.siamese import FORMAT as SIAMESE_FORMAT
from ..models.siamese import SiameseModel
from ..runtime.devices import host_bytes, resolve_device, to_device
from ..runtime.precision import autocast, default_precision, resolve_precision
from ..version import __version__

FORMAT = "siamese-cross/1"
PRIOR_FOLDER = "prior"  # the prior bi-encoder's own model folder, inside the cross-encoder's
DEFAULT_THRESHOLD = 0.5  # a probability: chosen on validation pairs after training


@dataclass
class CrossConfig:
    """The cross-encoder's architecture (saved as ``config.json``)."""

    transformer: str = "minilm"  # a name (minilm, mpnet) or a Hugging Face folder: where the weights start
    max_length: int = 256  # tokens of the pair together; the longer text is cut first
    # A bi-encoder whose cosine the cross-encoder corrects: minilm, mpnet, a sentence-transformers
    # folder or a Siamese model folder (None: the transformer alone decides).
    prior: str | None = None
    hf_config: dict | None = field(default=None, repr=False)  # the transformer's own config (set when built)

    @classmethod
    def of(cls, model_config: ModelConfig) -> CrossConfig:
        """The architecture ``ModelConfig(cross=True)`` asks for: the transformer of
        ``encoder_options["path"]`` (default minilm), its ``max_length`` and ``encoder_options["prior"]``."""
        options = model_config.encoder_options
        return cls(
            transformer=options.get("path") or "minilm",
            max_length=model_config.max_length or cls.max_length,
            prior=options.get("prior"),
        )

    def check(self) -> None:
        if not isinstance(self.max_length, int) or not 8 <= self.max_length <= 4096:
            raise ConfigError(f"max_length must be an integer in [8, 4096], got {self.max_length!r}")


class CrossNetwork(nn.Module):
    """transformer([CLS] a [SEP] b [SEP]) → mean of the token states → Linear → one logit per pair."""

    def __init__(self, config: CrossConfig):
        super().__init__()
        if config.hf_config is None:  # first build: pretrained weights
            require("transformer", "transformers")
            from transformers import AutoModel

            folder = model_folder(config.transformer)
            if not (folder / "config.json").is_file():
                raise ModelError(f"{folder}: not a Hugging Face model folder (no config.json)")
            require_safetensors(folder)
            with quiet_loading():
                self.transformer = AutoModel.from_pretrained(
                    str(folder), local_files_only=True, add_pooling_layer=False, use_safetensors=True
                )
            config.hf_config = json.loads(self.transformer.config.to_json_string())
        else:  # rebuilt from a saved folder: the weights follow
            # load() reads every weight next, strictly
            self.transformer = rebuild_transformer(config.hf_config, pooler=False, initialise=False)
        self.head = nn.Linear(self.transformer.config.hidden_size, 1)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        self.has_prior = config.prior is not None
        if self.has_prior:
            # logit += scale * cosine + shift: frozen (fitted before training); the head starts at
            # zero so the untrained model is exactly the calibrated bi-encoder.
            self.register_buffer("prior_scale", torch.ones(1))
            self.register_buffer("prior_shift", torch.zeros(1))
            nn.init.zeros_(self.head.weight)

    def forward(
        self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor, prior: torch.Tensor | None = None
    ) -> torch.Tensor:
        states = self.transformer(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
        # Mean over the pair's tokens, not [CLS]: the sentence encoders it starts from (MiniLM,
        # mpnet) were trained mean-pooled, and their [CLS] state carries little (first run: Quora
        # ROC-AUC 0.726 with [CLS]).
        weights = mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * weights).sum(1, dtype=torch.float32) / weights.sum(1).clamp(min=1).float()
        logit = self.head(pooled).squeeze(-1)
        if self.has_prior:
            if prior is None:
                raise ValueError("this cross-encoder corrects a bi-encoder: give the pairs' prior cosines")
            logit = logit + self.prior_scale * prior.to(logit.dtype) + self.prior_shift
        return logit


class PairTokenizer:
    """The transformer's tokenizer.json on pairs: [CLS] a [SEP] b [SEP], longest text cut first."""

    def __init__(self, tokenizer: Tokenizer, max_length: int):
        self.tokenizer = tokenizer
        self.tokenizer.encode_special_tokens = True  # a "[SEP]" typed into a text is text, as in Vectorizer
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length, strategy="longest_first")
        self.pad_id = (
            tokenizer.token_to_id("[PAD]")
            if tokenizer.token_to_id("[PAD]") is not None
            else (tokenizer.token_to_id("<pad>") or 0)
        )

    @classmethod
    def load(cls, path: Path, max_length: int) -> PairTokenizer:
        try:
            return cls(Tokenizer.from_file(str(path)), max_length)
        except Exception as e:  # tokenizers raises its own exception types
            raise ModelError(f"{path}: unreadable tokenizer ({e})") from None

    def encode(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> list:
        return self.tokenizer.encode_batch(list(zip(texts_a, texts_b)))

    def batch(self, encodings: Sequence) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, token types, attention mask), right-padded to the batch's longest pair."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for i, e in enumerate(encodings):
            n = len(e.ids)
            ids[i, :n], types[i, :n], mask[i, :n] = e.ids, e.type_ids, 1
        return torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask)


class CrossEncoder:
    """Scores pairs with a cross-encoder: :meth:`similarity_pairwise` (a probability-like score in [0, 1]),
    :meth:`predict` (above :attr:`threshold`), a calibrator like :class:`siamese.SiameseModel`'s."""

    kind = "cross"  # what the CLI and server check before asking for vectors

    def __init__(
        self,
        network: CrossNetwork,
        tokenizer: PairTokenizer,
        config: CrossConfig,
        info: dict | None = None,
        prior: SiameseModel | None = None,
    ):
        self.network = network
        self.prior = prior  # the bi-encoder whose cosine the logit starts from (config.prior), frozen
        self.tokenizer = tokenizer
        self.config = config
        self.info = dict(info or {})
        self.threshold = DEFAULT_THRESHOLD
        self.calibrator: Calibrator | None = None
        self.path: Path | None = None
        self.precision: str | None = None  # None: $SIAMESE_PRECISION, else auto (bf16 on native-bf16 CPUs)
        self.device = torch.device("cpu")  # where the network (and the prior's weights) are: see to()

    def to(self, device: str | torch.device | None = "auto") -> CrossEncoder:
        """Move the network, and the prior bi-encoder, to ``device`` (auto, cpu, cuda, cuda:N, mps)."""
        device = resolve_device(device)
        self.network.to(device)
        if self.prior is not None:
            self.prior.to(device)
        self.device = device
        return self

    def device_batch(self, encodings: Sequence) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, token types, attention mask) of ``encodings``, padded, on the network's device."""
        return tuple(to_device(t, self.device) for t in self.tokenizer.batch(encodings))

    @classmethod
    def build(cls, config: CrossConfig | None = None) -> CrossEncoder:
        """A cross-encoder starting from the pretrained transformer (its head untrained)."""
        config = copy.deepcopy(config) if config else CrossConfig()
        config.check()
        network = CrossNetwork(config)
        folder = model_folder(config.transformer)
        tokenizer = PairTokenizer.load(folder / "tokenizer.json", config.max_length)
        info = {"transformer": str(folder)}
        prior = None
        if config.prior is not None:
            prior = load_prior(config.prior)
            info["prior"] = {"source": config.prior, "fingerprint": prior.fingerprint()}
        return cls(network, tokenizer, config, info, prior)

    def prior_cosines(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> np.ndarray | None:
        """The prior bi-encoder's cosine per pair (symmetric); None without a prior."""
        if self.prior is None:
            return None
        return self.prior.similarity_pairwise(list(texts_a), list(texts_b)).astype(np.float32)

    def logits(
        self, texts_a: Sequence[str], texts_b: Sequence[str], *, batch_size: int = 32, prior: np.ndarray | None = None
    ) -> np.ndarray:
        """The network's logit for each pair in the given order (no symmetry). ``prior``: the
        pairs' :meth:`prior_cosines`, when the caller has them already."""
        if len(texts_a) != len(texts_b):
            raise ValueError(f"{len(texts_a)} first texts but {len(texts_b)} second texts")
        if prior is None:
            prior = self.prior_cosines(texts_a, texts_b)
        cosines = (
            None if prior is None else to_device(torch.from_numpy(np.asarray(prior, dtype=np.float32)), self.device)
        )
        encodings = self.tokenizer.encode(texts_a, texts_b)
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")  # length-sorted batches: little padding
        out = np.empty(len(encodings), dtype=np.float32)
        precision = resolve_precision(self.precision or default_precision(), self.device)
        self.network.eval()
        parts = []  # kept on the device until the end: no wait for the GPU after every batch
        with torch.inference_mode(), autocast(precision, self.device.type)():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                batch = self.device_batch([encodings[i] for i in rows])
                parts.append(self.network(*batch, None if cosines is None else cosines[rows]).float())
        if parts:
            out[order] = torch.cat(parts).cpu().numpy()
        return out

    def similarity(self, texts_a: Sequence[str], texts_b: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """The ``len(a) × len(b)`` matrix of every text of ``a`` read with every one of ``b`` (as a
        bi-encoder's :meth:`~siamese.model.SiameseModel.similarity`): one pass per pair, so
        ``len(a) * len(b)`` passes. Aligned pairs: :meth:`similarity_pairwise`."""
        texts_a, texts_b = list(texts_a), list(texts_b)
        scores = self.similarity_pairwise(
            [a for a in texts_a for _ in texts_b], texts_b * len(texts_a), batch_size=batch_size
        )
        return scores.reshape(len(texts_a), len(texts_b))

    def similarity_pairwise(
        self, texts_a: Sequence[str], texts_b: Sequence[str], *, batch_size: int = 32, prior: np.ndarray | None = None
    ) -> np.ndarray:
        """Each aligned pair's score: sigmoid of the mean logit of (a, b) and (b, a), symmetric, in
        [0, 1]. ``prior``: the pairs' :meth:`prior_cosines`, when the caller has them already."""
        texts_a, texts_b = list(texts_a), list(texts_b)
        if prior is None:
            prior = self.prior_cosines(texts_a, texts_b)  # symmetric: computed once for both orders
        both = self.logits(
            texts_a + texts_b,
            texts_b + texts_a,
            batch_size=batch_size,
            prior=None if prior is None else np.concatenate([prior, prior]),
        )
        n = len(texts_a)
        return sigmoid((both[:n] + both[n:]) / 2).astype(np.float32)

    def predict(
        self,
        pairs_or_a: tuple[str, str] | Sequence[tuple[str, str]] | Sequence[str] | PairsLike,
        texts_b: Sequence[str] | None = None,
        *,
        threshold: float | None = None,
    ) -> np.ndarray | bool:
        """True where a pair is a duplicate: its score above the threshold (the model's unless given). Takes what
        :meth:`SiameseModel.predict <siamese.models.siamese.SiameseModel.predict>` takes: one pair ``(text1, text2)``
        (one ``bool``), or a list of pairs, two aligned lists of texts, a table with two text columns or
        :class:`siamese.Pairs` (one verdict per pair). Scores themselves: :meth:`similarity_pairwise`."""
        t = self.threshold if threshold is None else check_threshold(threshold)
        return verdicts(self.similarity_pairwise, pairs_or_a, texts_b, t)

    def set_threshold(self, threshold: float) -> float:
        """The decision threshold, clipped to [0, 1] (the scores are probabilities); returns it."""
        self.threshold = float(min(max(threshold, 0.0), 1.0))
        return self.threshold

    def explain(self, text1: str, text2: str, *, similarity: float | None = None):
        """Which words drove the verdict, by occlusion (:mod:`siamese.evaluation.explain`); ``similarity``: the
        score already reported for the pair, stated by the explanation too."""
        from ..evaluation.explain import explain_pair

        return explain_pair(self, text1, text2, similarity=similarity)

    def fingerprint(self) -> str:
        h = hashlib.sha256(json.dumps(asdict(self.config), sort_keys=True).encode())
        for name, tensor in sorted(self.network.state_dict().items()):
            h.update(name.encode())
            h.update(host_bytes(tensor))
        if self.prior is not None:
            h.update(self.prior.fingerprint().encode())
        return h.hexdigest()

    # -- persistence -------------------------------------------------------------------------

    def _config_json(self) -> str:
        manifest = {
            "format": FORMAT,
            "siamese_version": __version__,
            **asdict(self.config),
            "threshold": self.threshold,
            "info": self.info,
        }
        if self.calibrator is not None:
            manifest["calibration"] = self.calibrator.to_dict()
        return json.dumps(manifest, indent=2) + "\n"

    def write(self, folder: Path) -> None:
        with naming(folder / "config.json"):
            (folder / "config.json").write_text(self._config_json())
        with naming(folder / "tokenizer.json"):
            self.tokenizer.tokenizer.save(str(folder / "tokenizer.json"))
        state = {k: v.detach().contiguous() for k, v in self.network.state_dict().items()}
        with naming(folder / "model.safetensors"):
            save_file(state, str(folder / "model.safetensors"), metadata={"format": FORMAT})
        if self.prior is not None:
            (folder / PRIOR_FOLDER).mkdir()
            self.prior.write(folder / PRIOR_FOLDER)

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the folder atomically (over a folder that is not a siamese one only with ``overwrite``)."""
        path = Path(path)
        with atomic_dir(path, overwrite=overwrite, kind="model") as tmp:
            self.write(tmp)
        self.path = path.resolve()
        return path

    def save_fitted(self, path: str | os.PathLike | None = None) -> Path:
        """Rewrite config.json alone (threshold, calibration, info), as ``SiameseModel.save_fitted``."""
        path = Path(path) if path is not None else self.path
        if path is None:
            raise ModelError("this model has no folder yet: save it with model.save(path)")
        on_disk = read_manifest(path, "config.json", FORMAT, ModelError, "cross-encoder")
        if on_disk.get("hf_config") != self.config.hf_config:
            raise ModelError(f"{path / 'config.json'}: the folder holds a different model; save this one elsewhere")
        with atomic_file(path / "config.json") as tmp:
            tmp.write_text(self._config_json())
        return path

    @classmethod
    def load(
        cls, path: str | os.PathLike, *, precision: str | None = None, device: str | torch.device | None = "auto"
    ) -> CrossEncoder:
        """Open a cross-encoder folder on ``device`` (auto: a GPU when there is one)."""
        path = Path(path)
        device = resolve_device(device)  # an unavailable device is refused before the weights are read
        raw = read_manifest(path, "config.json", FORMAT, ModelError, "cross-encoder")
        known = {f.name for f in fields(CrossConfig)}
        try:
            config = CrossConfig(**{k: v for k, v in raw.items() if k in known})
            config.check()
            if not isinstance(config.hf_config, dict) or "model_type" not in config.hf_config:
                raise ValueError("hf_config must be the transformer's config")
            network = CrossNetwork(config)
        except (TypeError, ValueError, KeyError) as e:
            raise ModelError(f"{path / 'config.json'}: invalid field ({e})") from None
        for name in ("tokenizer.json", "model.safetensors") + (
            (f"{PRIOR_FOLDER}/config.json",) if config.prior else ()
        ):
            if not (path / name).is_file():
                raise ModelError(f"{path}: cross-encoder folder is missing {name}")
        prior = SiameseModel.load(path / PRIOR_FOLDER, precision=precision, device="cpu") if config.prior else None
        try:
            state = load_file(str(path / "model.safetensors"))
            if not all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point()):
                raise ModelError(f"{path / 'model.safetensors'}: weights hold NaN or infinite values")
            network.load_state_dict(state)
        except (RuntimeError, OSError, SafetensorError) as e:
            raise ModelError(
                f"{path / 'model.safetensors'}: weights do not fit the config ({str(e).splitlines()[0]})"
            ) from None
        network.eval()
        model = cls(
            network, PairTokenizer.load(path / "tokenizer.json", config.max_length), config, raw.get("info"), prior
        )
        threshold = raw.get("threshold", DEFAULT_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise ModelError(f"{path / 'config.json'}: threshold must be a number, got {threshold!r}")
        model.threshold = min(max(float(threshold), 0.0), 1.0)  # a probability
        if raw.get("calibration") is not None:
            try:
                model.calibrator = Calibrator.from_dict(raw["calibration"])
            except (ValueError, TypeError) as e:
                raise ModelError(f"{path / 'config.json'}: invalid calibration ({e})") from None
        model.path, model.precision = path.resolve(), precision
        return model.to(device)


def load_prior(source: str) -> SiameseModel:
    """The bi-encoder a cross-encoder corrects: a Siamese model folder, or a pretrained encoder as-is."""
    from ..models.pretrained import folder_format
    from ..models.sentence_encoder import sentence_encoder

    kind = folder_format(model_folder(source))
    if kind == SIAMESE_FORMAT:
        return SiameseModel.load(model_folder(source))
    if kind == FORMAT:
        raise ModelError(
            f"{source}: a cross-encoder cannot be the prior; give a bi-encoder (minilm, mpnet or a folder)"
        )
    return sentence_encoder(source)[0]
