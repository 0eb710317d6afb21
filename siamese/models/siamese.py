"""SiameseModel = vectorizer + shared encoder + head + decision threshold; save/load a model folder.

A model folder holds ``config.json`` (everything needed to rebuild the model, plus what was fitted
after training: the threshold and the calibration), ``tokenizer.json`` and ``model.safetensors``.
:meth:`SiameseModel.load` needs nothing else and never unpickles. A transformer encoder's weights
sit in ``0_Transformer/`` under Hugging Face's names, with the files that make the folder a
sentence-transformers model too (see :mod:`siamese.models.st_layout`); an exported folder has
``model.onnx`` instead (see :mod:`siamese.models.export`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from ..config.configs import MANIFEST_FIELDS, MODEL_FORMAT, ModelConfig
from ..data.glove import embedding_matrix, load_glove
from ..data.pairs import Pairs, PairsLike
from ..data.vocabulary import PretrainedVectorizer, Vectorizer, pad
from ..decision.calibrator import Calibrator
from ..decision.threshold import check_threshold
from ..errors import ConfigError, ModelError, SiameseError
from ..io.atomic import atomic_dir, atomic_file, naming
from ..io.manifest import check_fields, read_manifest
from ..io.progress import tqdm
from ..io.weights import check_shapes, expected_shapes, load_finite, meta_build, read_header
from ..runtime.devices import host_bytes, is_cpu, resolve_device, to_device
from ..runtime.parallel import ParallelEncoder, single_threaded_ops
from ..runtime.precision import autocast, default_precision, resolve_precision
from ..version import __version__
from .encoders import Encoder, TransformerEncoder, build_encoder, encoder_class
from .encoders.transformer import weights_follow
from .heads import HEADS, build_head, clip_threshold
from .inputs import (
    VECTORS,
    TextsOrVectors,
    any_tensor,
    check_text_items,
    stack_vectors,
    text_list,
    vector_list,
    verdicts,
)
from .st_layout import encoder_weights, write_layout

if TYPE_CHECKING:
    from ..evaluation.explain import Explanation

FORMAT = MODEL_FORMAT
# The decision threshold before one is chosen on validation pairs. It is fitted state, like the
# calibration: kept on the model (config.json's top-level "threshold"), not in the architecture.
DEFAULT_THRESHOLD = 0.7
HEAD_PREFIX = "head."


def check_trainable(config: ModelConfig) -> None:
    """An exported model (encoder "onnx") only encodes: refuse to build or train one."""
    if encoder_class(config.encoder).exported:
        raise ConfigError(
            f"encoder {config.encoder!r} is an exported model (siamese export) and runs inference only: "
            "train the PyTorch model, then export it"
        )


# Fields added after the first model format: left out of the fingerprint while at their defaults,
# so indexes built by older models still recognise them.
_NEW_FIELDS = ("loss", "encoder_options", "glove", "oov_buckets", "char_ngrams", "char_buckets", "tokenizer", "cross")


class SiameseModel:
    """A trained (or freshly built) Siamese text model."""

    def __init__(
        self,
        vectorizer: Vectorizer,
        encoder: torch.nn.Module,
        config: ModelConfig,
        info: dict | None = None,
        head: torch.nn.Module | None = None,
    ):
        if config.head not in HEADS:
            raise ModelError(f"unknown head {config.head!r}; choose one of: {', '.join(HEADS)}")
        self.vectorizer = vectorizer
        self.encoder = encoder
        self.head = head if head is not None else build_head(config.head, encoder.dim)
        self.config = config
        self.info = dict(info or {})  # training summary etc., saved beside the config
        self.threshold = DEFAULT_THRESHOLD  # similarity above it = duplicate; chosen on validation pairs
        # similarity -> duplicate probability (siamese.decision.calibration); saved beside the config as
        # "calibration", outside the architecture, so calibrating keeps the fingerprint.
        self.calibrator: Calibrator | None = None
        self.path: Path | None = None  # the folder it was loaded from or saved to
        # What encode() computes in: "auto", "bf16" or "fp32"; None: $SIAMESE_PRECISION, else auto.
        self.precision: str | None = None
        self.device = torch.device("cpu")  # where the encoder and head weights are (see to())

    @classmethod
    def build(cls, texts: Iterable[str], config: ModelConfig | None = None) -> SiameseModel:
        """Learn the vocabulary from ``texts`` (or take the pretrained encoder's tokenizer) and
        build an untrained encoder and head."""
        # A copy: the build records what rebuilds the encoder (a transformer's hf_config) in the
        # config it keeps; the caller's config must stay reusable (with hf_config, a second
        # build would start a transformer from random weights instead of the pretrained ones).
        config = replace(config) if config else ModelConfig()
        config.check()
        check_trainable(config)
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)  # read twice: vocabulary, then counts
        if config.tokenizer == "subwords":
            raise ConfigError(
                "a subword vocabulary is taken from a teacher, not learned here: build the model with "
                "siamese distill (siamese.distill.distill), then fine-tune it with train(..., initial=model)"
            )
        torch.manual_seed(config.seed)
        options, info = config.encoder_kwargs(), {}
        if encoder_class(config.encoder).own_tokenizer:
            encoder = build_encoder(config.encoder, None, **options)
            vectorizer = PretrainedVectorizer.load(Path(encoder.path) / "tokenizer.json", max_length=config.max_length)
        else:
            vectorizer = Vectorizer.fit(
                texts,
                max_vocab=config.max_vocab,
                min_frequency=config.min_frequency,
                lowercase=config.lowercase,
                max_length=config.max_length,
                oov_buckets=config.oov_buckets,
                char_ngrams=config.char_ngrams,
                char_buckets=config.char_buckets,
            )
            if config.glove:
                options["embeddings"], info["glove"] = glove_embeddings(config.glove, vectorizer, config.seed)
                options["embedding_dim"] = options["embeddings"].shape[1]
            if encoder_class(config.encoder).takes_word_counts:
                options["word_counts"] = vectorizer.counts(texts)
            encoder = build_encoder(config.encoder, vectorizer.vocab_size, **options)
        # Whatever config.json must keep to rebuild this encoder (e.g. a transformer's own config).
        saved = {**config.encoder_options, **encoder.saved_options()}
        if "embedding_dim" in options:  # the width built (GloVe's, when it sets the embedding)
            saved["embedding_dim"] = options["embedding_dim"]
        config.encoder_options = saved
        return cls(vectorizer, encoder, config, info)

    @classmethod
    def from_pretrained(
        cls,
        name_or_folder: str | os.PathLike,
        val_pairs: PairsLike | Sequence[Pairs] | None = None,
        *,
        max_length: int | None = None,
        metric: str = "accuracy",
        device: str = "auto",
        progress: bool = False,
    ) -> SiameseModel:
        """A cosine Siamese model on a pretrained sentence encoder, untrained: ``minilm``, ``mpnet`` (or
        their own names, ``all-MiniLM-L6-v2``, ...) or a local sentence-transformers or Hugging Face
        folder, with the folder's pooling. Its threshold is chosen on ``val_pairs`` (one set or several;
        both labels needed) to maximise ``metric``; without them it stays at the default.
        ``info["pretrained"]`` records what it was built from and what the threshold was chosen on.
        ``device``: where the validation pairs are encoded (auto: a GPU when there is one); ``progress``:
        their encoding's progress on stderr. The same as :func:`siamese.from_pretrained`, under the name
        Hugging Face code calls. A folder this returns saved (``model.save``) opens with :meth:`load`."""
        from .pretrained_folder import build_pretrained, set_threshold, validation_parts

        parts = validation_parts(val_pairs)
        model, info = build_pretrained(cls, name_or_folder, max_length=max_length)
        model.to(device)
        model.info["pretrained"] = {**info, "threshold_choice": set_threshold(model, parts, metric, progress=progress)}
        return model

    def to(self, device: str | torch.device | None = "auto") -> SiameseModel:
        """Move the weights to ``device`` (auto, cpu, cuda, cuda:N, mps; see :mod:`siamese.runtime.devices`)."""
        device = resolve_device(device)
        if self.encoder.exported and not is_cpu(device):
            raise ConfigError(f"an exported model runs in ONNX Runtime on the CPU, not on {device}; use --device cpu")
        if not self.encoder.exported:
            self.encoder.to(device)
        self.head.to(device)
        self.device = device
        return self

    @property
    def dim(self) -> int:
        """Width of the vectors :meth:`encode` returns."""
        return self.encoder.dim

    def set_threshold(self, threshold: float) -> float:
        """Set the decision threshold, clipped to the head's range of scores; returns it."""
        self.threshold = clip_threshold(self.config.head, threshold)
        return self.threshold

    # -- inference ---------------------------------------------------------------------------

    def encoding_precision(self, precision: str | None = None) -> str:
        """The precision :meth:`encode` runs in, bf16 or fp32: ``precision``, else
        :attr:`precision`, else ``$SIAMESE_PRECISION``, else auto. Auto is bf16 only for
        encoders that ask for it (the transformer's large matmuls: ~2.5x faster, cosine to fp32
        > 0.999) on CPUs with native bf16; the word encoders keep fp32, the same vectors on every CPU."""
        asked = precision or self.precision or default_precision()
        if asked == "auto" and not self.encoder.bf16_inference:
            resolve_precision(asked)  # still refuses a misspelt value
            return "fp32"
        return resolve_precision(asked, self.device)

    def encode(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int | None = None,
        progress: bool = False,
        precision: str | None = None,
        show_progress_bar: bool | None = None,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        normalize_embeddings: bool = False,
        device: str | torch.device | None = None,
        prompt: str | None = None,
        prompt_name: str | None = None,
        output_value: str | None = "sentence_embedding",
        truncate_dim: int | None = None,
        pool=None,
        chunk_size: int | None = None,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """One row per text (float32), or one vector for a single ``str``: unit vectors for the
        cosine head, the encoder's raw features for the others. Texts are length-sorted into
        batches. ``precision``: what the encoder computes in (see :meth:`encoding_precision`).

        The keywords of sentence-transformers' ``encode`` work as they do there:
        ``show_progress_bar`` (as ``progress``), ``convert_to_tensor`` (a torch tensor on the
        model's device), ``convert_to_numpy=False`` (a list of tensors), ``normalize_embeddings``
        (unit rows), ``device`` (moves the model there, as sentence-transformers does),
        ``prompt`` (prepended to every text), ``truncate_dim`` (the first dimensions), and
        ``precision="float32"``. Those siamese has no counterpart for (quantized precisions,
        token embeddings, named prompts, a process pool) are refused in one line."""
        _refuse_st_keywords(precision, prompt_name, output_value, pool, chunk_size)
        whole = isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool)
        if batch_size is not None and not (whole and batch_size >= 1):
            raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        if precision == "float32":  # sentence-transformers' name for unquantized vectors
            precision = "fp32"
        if device is not None and resolve_device(device) != self.device:
            self.to(device)
        single = isinstance(texts, str)
        texts = [texts] if single else text_list(texts, "encode")
        check_text_items(texts, "encode takes a text or a list of texts")
        if prompt:
            texts = [prompt + t for t in texts]
        out = self._encode(texts, batch_size, bool(progress or show_progress_bar), precision)
        if truncate_dim is not None:
            if not 0 < truncate_dim <= self.dim:
                raise ValueError(
                    f"truncate_dim must be from 1 to the model's {self.dim} dimensions, got {truncate_dim}"
                )
            out = np.ascontiguousarray(out[:, :truncate_dim])
        if normalize_embeddings:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        if convert_to_tensor:
            vectors = torch.from_numpy(out).to(self.device)
            return vectors[0] if single else vectors
        if not convert_to_numpy:
            rows = [torch.from_numpy(row).to(self.device) for row in out]
            return rows[0] if single else rows
        return out[0] if single else out

    def encode_query(self, texts: str | Sequence[str], **options) -> Any:
        """:meth:`encode` (sentence-transformers' name for encoding queries: siamese encodes
        queries and documents alike)."""
        return self.encode(texts, **options)

    def encode_document(self, texts: str | Sequence[str], **options) -> Any:
        """:meth:`encode` (sentence-transformers' name for encoding documents)."""
        return self.encode(texts, **options)

    def get_embedding_dimension(self) -> int:
        """Width of the vectors :meth:`encode` returns (sentence-transformers' name for :attr:`dim`)."""
        return self.dim

    get_sentence_embedding_dimension = get_embedding_dimension  # its name before sentence-transformers 6

    def get_max_seq_length(self) -> int | None:
        """:attr:`max_seq_length` (sentence-transformers' getter)."""
        return self.max_seq_length

    @property
    def max_seq_length(self) -> int | None:
        """Tokens read per text (longer texts are cut): the model's ``max_length``, fixed when it was built."""
        return self.config.max_length

    @max_seq_length.setter
    def max_seq_length(self, value) -> None:
        raise AttributeError(
            "a siamese model's max_length is fixed when it is built (the saved model depends on it): "
            "siamese pretrained --max-length N, or ModelConfig(max_length=N) for train"
        )

    @property
    def similarity_fn_name(self) -> str:
        """What :meth:`similarity` computes: "cosine" for the cosine head, else the head's own score."""
        return "cosine" if self.config.head == "cosine" else self.config.head

    @torch.inference_mode()
    def _encode(self, texts: list[str], batch_size: int | None, progress: bool, precision: str | None) -> np.ndarray:
        batch_size = batch_size or self.encoder.encode_batch_size
        self.encoder.eval()
        chosen = self.encoding_precision(precision)
        runner = self._runner(chosen)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        chunk = 1 << 16  # tokenize in chunks so a million texts never sit as ids all at once
        bar = tqdm(total=len(texts), desc="encode", unit="text", disable=not progress)
        with single_threaded_ops(runner.workers > 1):
            for start in range(0, len(texts), chunk):
                if chosen == "fp32" and self._encode_flat(texts[start : start + chunk], out[start : start + chunk]):
                    bar.update(min(chunk, len(texts) - start))
                    continue
                ids = self.vectorizer.encode(texts[start : start + chunk])
                order = np.argsort([len(s) for s in ids], kind="stable")
                for b in range(0, len(order), batch_size):
                    rows = order[b : b + batch_size]
                    batch, lengths = pad([ids[i] for i in rows], self.vectorizer.pad_id)
                    on_device = (to_device(torch.from_numpy(x), self.device) for x in (batch, lengths))
                    vectors = runner(*on_device)
                    out[start + rows] = vectors.float().cpu().numpy()
                    bar.update(len(rows))
        bar.close()
        return out

    @torch.inference_mode()
    def _encode_flat(self, texts: list[str], out: np.ndarray) -> bool:
        """Encode ``texts`` into ``out`` in one call without padding, if the encoder pools that way
        (a static model: ~2x faster, the same vectors); False if it does not."""
        if not texts or type(self.encoder).pool_flat is Encoder.pool_flat:
            return False
        ids, lengths = self.vectorizer.encode_flat(texts)
        vectors = self.encoder.pool_flat(
            to_device(torch.from_numpy(ids), self.device), to_device(torch.from_numpy(lengths), self.device)
        )
        if vectors is None:
            return False
        out[:] = vectors.float().cpu().numpy()
        return True

    def _runner(self, precision: str = "fp32") -> ParallelEncoder:
        """Batches are split into length groups encoded on one thread per core (on the CPU; a GPU
        takes each batch whole)."""
        key = (self.encoder, precision, self.device)
        if getattr(self, "_parallel", None) is None or self._parallel_key != key:
            if getattr(self, "_parallel", None) is not None:
                self._parallel.close()
            self._parallel = ParallelEncoder(
                self.encoder, None if is_cpu(self.device) else 1, autocast(precision, self.device.type)
            )
            self._parallel_key = key
        return self._parallel

    def similarity(
        self,
        a: TextsOrVectors,
        b: TextsOrVectors,
        *,
        batch_size: int | None = None,
    ) -> np.ndarray | torch.Tensor:
        """The ``len(a) × len(b)`` matrix of the head's scores of every text (or vector) of ``a``
        against every one of ``b``, as sentence-transformers' ``similarity`` returns: a cosine in
        [-1, 1], or a duplicate probability in [0, 1] for the manhattan and classifier heads.

        ``a`` and ``b``: texts (a ``str`` is one text), or vectors from :meth:`encode` (NumPy or
        torch, one row per text or a single vector, or a list of 1-D vectors as
        ``encode(..., convert_to_numpy=False)`` returns). A torch tensor in (or a list of them)
        gives a (CPU) tensor out, else a NumPy array. One score per aligned pair ``(a[i], b[i])``:
        :meth:`similarity_pairwise`."""
        tensor = any_tensor(a, b)
        a, b = self._vectors(a, batch_size), self._vectors(b, batch_size)
        if self.config.head == "cosine":  # one product of the unit rows
            unit = torch.nn.functional.normalize
            scores = np.clip((unit(a.cpu(), dim=1) @ unit(b.cpu(), dim=1).T).numpy(), -1.0, 1.0)
        elif len(a):
            scores = np.stack([self.score(row.expand(len(b), -1), b) for row in a])
        else:
            scores = np.empty((0, len(b)), dtype=np.float32)
        return torch.from_numpy(scores) if tensor else scores

    def similarity_pairwise(
        self,
        a: TextsOrVectors,
        b: TextsOrVectors,
        *,
        batch_size: int | None = None,
    ) -> np.ndarray | torch.Tensor:
        """The head's score of each aligned pair ``(a[i], b[i])`` (as sentence-transformers'
        ``similarity_pairwise``): the diagonal of :meth:`similarity`, without the rest."""
        tensor = any_tensor(a, b)
        a, b = self._vectors(a, batch_size), self._vectors(b, batch_size)
        if len(a) != len(b):
            raise ValueError(
                f"a has {len(a)} texts or vectors but b has {len(b)}; similarity_pairwise scores aligned pairs "
                "(every a against every b: similarity)"
            )
        scores = self.score(a, b)
        return torch.from_numpy(scores) if tensor else scores

    def _vectors(self, x, batch_size: int | None) -> torch.Tensor:
        """Texts encoded, or vectors as they are: a 2-D float32 tensor. A list of 1-D vectors (what
        ``encode(..., convert_to_numpy=False)`` returns) is their matrix."""
        if vector_list(x):
            x = stack_vectors(x)
        if isinstance(x, (np.ndarray, torch.Tensor)):
            vectors = torch.as_tensor(x).detach().float()
            if vectors.dim() == 1:
                vectors = vectors.unsqueeze(0)
            if vectors.dim() != 2 or vectors.shape[1] != self.dim:
                raise ValueError(
                    f"vectors of shape {tuple(x.shape)}: expected (n, {self.dim}) from this model's encode"
                )
            return vectors
        texts = [x] if isinstance(x, str) else text_list(x, "similarity", VECTORS)
        check_text_items(texts, f"similarity takes texts, or {VECTORS}")
        return torch.from_numpy(self.encode(texts, batch_size=batch_size))

    @torch.inference_mode()
    def score(self, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        """The head on encodings (rows of :meth:`encode`)."""
        self.head.eval()
        scores = self.head(a.to(self.device), b.to(self.device)).float().cpu().numpy()
        return np.clip(scores, *self.head.score_range)  # float rounding: a cosine of 1.0000001 is 1

    def probability(
        self,
        a: TextsOrVectors,
        b: TextsOrVectors,
        *,
        batch_size: int | None = None,
    ) -> np.ndarray | None:
        """Calibrated duplicate probability per aligned pair (see :mod:`siamese.decision.calibration`), or
        ``None`` when the model is not calibrated (as the CLI's and the server's ``null``):
        calibrate it with ``siamese calibrate`` or :func:`siamese.decision.calibration.calibrate`."""
        if self.calibrator is None:
            return None
        return self.calibrator(self.similarity_pairwise(a, b, batch_size=batch_size))

    def predict(
        self,
        pairs_or_a: tuple[str, str] | Sequence[tuple[str, str]] | Sequence[str] | PairsLike,
        b: Sequence[str] | None = None,
        *,
        threshold: float | None = None,
    ) -> np.ndarray | bool:
        """True where a pair is a duplicate: similarity above the threshold (the model's unless
        given). Takes one pair ``(text1, text2)``, or two texts (one ``bool``, as sentence-transformers'
        ``CrossEncoder.predict`` gives one score), or, for one verdict per pair (a bool array):
        a list of ``(text1, text2)`` pairs, two aligned lists of texts, a table (a pandas
        DataFrame, a Hugging Face ``Dataset``, a dict of columns) whose two text columns are named
        as a pair file's (text1/text2, sentence1/sentence2, question1/question2, ...; a label
        column is not needed, nor read), or :class:`siamese.Pairs`."""
        t = self.threshold if threshold is None else check_threshold(threshold)
        return verdicts(self.similarity_pairwise, pairs_or_a, b, t)

    def explain(self, text1: str, text2: str, *, similarity: float | None = None) -> Explanation:
        """Which words of each text drove their similarity: a :class:`siamese.evaluation.explain.Explanation`
        (per-word weights; ``method`` "exact" for the bag of words, else "occlusion"). Pass the
        ``similarity`` already reported for the pair to have the explanation state the same number."""
        from ..evaluation.explain import explain_pair

        return explain_pair(self, text1, text2, similarity=similarity)

    def summary(self) -> str:
        """A Keras-like table of layers, output shapes and parameter counts."""
        from .summary import summary

        return summary(self)

    def fingerprint(self) -> str:
        """SHA-256 of the weights, vocabulary and architecture: what an index records to know its model."""
        h = hashlib.sha256()
        defaults = asdict(ModelConfig())
        config = {k: v for k, v in asdict(self.config).items() if not (k in _NEW_FIELDS and defaults[k] == v)}
        h.update(json.dumps(config, sort_keys=True).encode())
        h.update(self.vectorizer.tokenizer.to_str().encode())
        for name, tensor in sorted(self.state_dict().items()):
            h.update(name.encode())
            h.update(host_bytes(tensor))
        return h.hexdigest()

    # -- persistence -------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the model folder atomically (see :mod:`siamese.io.atomic`). An existing folder is
        replaced only when it is a siamese folder (or empty), or with ``overwrite``."""
        path = Path(path)
        with atomic_dir(path, overwrite=overwrite, kind="model") as tmp:
            self.write(tmp)
        self.path = path.resolve()
        return path

    def write(self, folder: Path) -> None:
        """The model folder's files, written into ``folder`` (an empty temporary folder: see :meth:`save`)."""
        from .card import write_card

        with naming(folder / "config.json"):
            (folder / "config.json").write_text(self._config_json())
        with naming(folder / "tokenizer.json"):
            self.vectorizer.save(folder / "tokenizer.json")
        write_card(self, folder)  # README.md (and history.png): what the model is, from its config and info
        if self.encoder.exported:
            self.encoder.save_to(folder)  # the graph file, as exported
            return
        state = self.state_dict()
        if isinstance(self.encoder, TransformerEncoder):
            # Its weights go (once) into a Hugging Face folder that sentence-transformers also reads.
            write_layout(
                folder, self.encoder, self.vectorizer, max_length=self.config.max_length, head=self.config.head
            )
            state = {k: v for k, v in state.items() if k.startswith(HEAD_PREFIX)}
        with naming(folder / "model.safetensors"):
            save_file(state, str(folder / "model.safetensors"), metadata={"format": FORMAT})

    def _config_json(self, config: ModelConfig | None = None, info: dict | None = None) -> str:
        """config.json's text: this model's, or (``siamese export``) another config and info with
        this model's vocabulary and calibration."""
        manifest = {
            "format": FORMAT,
            "siamese_version": __version__,
            "vocab_size": self.vectorizer.vocab_size,
            **asdict(config or self.config),
            "threshold": self.threshold,
            "info": self.info if info is None else info,
        }
        if self.calibrator is not None:
            manifest["calibration"] = self.calibrator.to_dict()
        return json.dumps(manifest, indent=2) + "\n"

    def save_fitted(self, path: str | os.PathLike | None = None) -> Path:
        """Rewrite only ``config.json`` of the model's folder (default: the one it was loaded from):
        the threshold, the calibration and the info change, the weights do not. One atomic file
        replace, so a crash leaves the old config or the new one, and any other file the user
        keeps in the folder stays. Refuses a folder holding a different architecture."""
        path = Path(path) if path is not None else self.path
        if path is None:
            raise ModelError("this model has no folder yet: save it with model.save(path)")
        file = path / "config.json"
        on_disk = read_manifest(path, "config.json", FORMAT, ModelError, "model")
        known = {f.name for f in fields(ModelConfig)}
        theirs = asdict(ModelConfig(**{k: v for k, v in on_disk.items() if k in known}))
        theirs["vocab_size"] = on_disk.get("vocab_size")
        ours = json.loads(
            json.dumps({**asdict(self.config), "vocab_size": self.vectorizer.vocab_size})
        )  # as JSON has it
        changed = sorted(k for k in ours if theirs.get(k) != ours[k])
        if changed:
            raise ModelError(
                f"{file}: the folder holds a different model (differs in {', '.join(changed)}); "
                "save this one elsewhere with model.save(path)"
            )
        mode = file.stat().st_mode & 0o777
        with atomic_file(file) as tmp:
            tmp.write_text(self._config_json())
            os.chmod(tmp, mode)  # the temporary file is private (0600); keep the config's own permissions
        self._rewrite_card(path, mode)
        return path

    def _rewrite_card(self, path: Path, mode: int) -> None:
        """The card states the new threshold and calibration; a README.md of the user's stays as it is."""
        from .card import CARD, card, ours

        if not ours(path):
            return
        with atomic_file(path / CARD) as tmp:
            tmp.write_text(card(self, plotted=(path / "history.png").is_file()), encoding="utf-8")
            os.chmod(tmp, mode & 0o666)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Encoder weights under their own names (as the first format had them), head weights under ``head.``."""
        state = {k: v.detach().cpu().contiguous() for k, v in self.encoder.state_dict().items()}
        state.update({f"{HEAD_PREFIX}{k}": v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()})
        return state

    @classmethod
    def load(
        cls, path: str | os.PathLike, *, precision: str | None = None, device: str | torch.device | None = "auto"
    ) -> SiameseModel:
        """Open a model folder (PyTorch or exported). ``precision``: what :meth:`encode` computes
        in (auto, bf16, fp32; default $SIAMESE_PRECISION, else auto). ``device``: auto (a GPU
        when there is one; an exported model stays on the CPU), cpu, cuda, cuda:N or mps."""
        from ..io.atomic import clear_leftovers
        from .pretrained import refuse_cross, require_model_folder

        path = Path(path)
        clear_leftovers(path)  # what a killed save of this folder left beside it
        require_model_folder(path)
        auto = device is None or str(device).strip().lower() == "auto"
        device = resolve_device(device)  # an unavailable device is refused before the weights are read
        config_file = path / "config.json"
        refuse_cross(path)  # a clear line instead of "unsupported format"
        raw = read_manifest(path, "config.json", FORMAT, ModelError, "model")
        check_fields(raw, MANIFEST_FIELDS, config_file, ModelError)
        known = {f.name for f in fields(ModelConfig)}
        config = ModelConfig(**{k: v for k, v in raw.items() if k in known})
        try:
            config.check()
        except SiameseError as e:
            raise ModelError(f"{config_file}: {e}") from None
        cls_ = encoder_class(config.encoder)
        exported = getattr(cls_, "exported", False)
        if exported and auto:
            device = torch.device("cpu")  # ONNX Runtime runs the graph on the CPU
        for name in ("tokenizer.json", getattr(cls_, "weights_file", "model.safetensors")):
            if not (path / name).is_file():
                raise ModelError(f"{path}: model folder is missing {name}")
        own_tokenizer = getattr(cls_, "own_tokenizer", False)
        if not own_tokenizer and "vocab_size" not in raw:
            raise ModelError(f"{config_file}: missing field 'vocab_size'")
        # The tokenizer first: vocab_size must match it before any layer is sized by it.
        vectorizer = _load_vectorizer(path, config, raw, own_tokenizer)
        options = config.encoder_kwargs() | ({"folder": path} if exported else {})
        vocab = None if own_tokenizer else raw["vocab_size"]
        weights = path / "model.safetensors"
        try:
            if not (own_tokenizer or exported):  # sizes against the weight file before allocating anything
                try:
                    shape_of = meta_build(lambda: build_encoder(config.encoder, vocab, **options))
                    shapes = expected_shapes(
                        {"": shape_of, HEAD_PREFIX: meta_build(lambda: build_head(config.head, shape_of.dim))}
                    )
                except RuntimeError as e:  # e.g. sizes whose product overflows
                    raise ValueError(str(e)) from None
                check_shapes(weights, read_header(weights, ModelError), shapes, ModelError)
            elif own_tokenizer and not exported and options.get("hf_config") is not None:
                _check_transformer_shapes(path, config, options)
            with weights_follow():  # every weight is loaded below: no random initialisation first
                encoder = build_encoder(config.encoder, vocab, **options)
            head = build_head(config.head, encoder.dim)
        except (KeyError, TypeError, ValueError, AttributeError, NotImplementedError) as e:
            raise ModelError(
                f"{config_file}: missing or invalid field ({str(e).splitlines()[0] if str(e) else e!r})"
            ) from None
        hf_weights = encoder_weights(path) if isinstance(encoder, TransformerEncoder) else None
        try:
            state = {} if exported else load_finite(weights, ModelError)  # an exported graph holds its weights
            head.load_state_dict({k[len(HEAD_PREFIX) :]: v for k, v in state.items() if k.startswith(HEAD_PREFIX)})
            rest = {k: v for k, v in state.items() if not k.startswith(HEAD_PREFIX)}
            if hf_weights is None:  # every other encoder, and transformer folders written before the layout
                encoder.load_state_dict(rest)
            else:
                if rest:
                    raise RuntimeError(f"encoder weights here and in {hf_weights.relative_to(path)}")
                weights = hf_weights
                encoder.model.load_state_dict(load_finite(hf_weights, ModelError))
        except (RuntimeError, OSError, SafetensorError) as e:
            raise ModelError(f"{weights}: weights do not fit the config ({str(e).splitlines()[0]})") from None
        encoder.eval()
        head.eval()
        model = cls(vectorizer, encoder, config, raw.get("info"), head)
        model.set_threshold(float(raw.get("threshold", DEFAULT_THRESHOLD)))  # checked with the other fields
        if raw.get("calibration") is not None:
            try:
                model.calibrator = Calibrator.from_dict(raw["calibration"])
            except (ValueError, TypeError) as e:
                raise ModelError(f"{config_file}: invalid calibration ({e})") from None
        model.path = path.resolve()
        model.precision = precision
        return model.to(device)


def _check_transformer_shapes(path: Path, config: ModelConfig, options: dict) -> None:
    """A saved transformer's sizes (its ``hf_config``) against its weight files' headers, on the
    meta device, before anything is allocated (as every other encoder is checked)."""
    from .encoders.transformer import check_hf_config

    config_file = path / "config.json"
    check_hf_config(options["hf_config"], config_file)
    try:
        encoder = meta_build(lambda: build_encoder(config.encoder, None, **options))
        head = meta_build(lambda: build_head(config.head, encoder.dim))
    except RuntimeError as e:  # e.g. sizes whose product overflows
        raise ValueError(str(e)) from None
    weights, hf_weights = path / "model.safetensors", encoder_weights(path)
    if hf_weights is None:  # written before the sentence-transformers layout: every weight in one file
        expected = expected_shapes({"": encoder, HEAD_PREFIX: head})
        check_shapes(weights, read_header(weights, ModelError), expected, ModelError)
        return
    expected = expected_shapes({"": encoder.model})
    check_shapes(hf_weights, read_header(hf_weights, ModelError), expected, ModelError)
    check_shapes(weights, read_header(weights, ModelError), expected_shapes({HEAD_PREFIX: head}), ModelError)


# sentence-transformers' encode keywords that have no siamese counterpart, each refused with the siamese way.
_QUANTIZED = ("int8", "uint8", "binary", "ubinary")


def _refuse_st_keywords(precision, prompt_name, output_value, pool, chunk_size) -> None:
    if precision in _QUANTIZED:
        raise ValueError(
            f"precision={precision!r} quantizes sentence-transformers' vectors; siamese's precision is what encode "
            "computes in (auto, bf16, fp32): quantize the float32 vectors with "
            "sentence_transformers.quantization.quantize_embeddings"
        )
    if prompt_name is not None:
        raise ValueError("a siamese model has no named prompts: pass the text itself with prompt=...")
    if output_value != "sentence_embedding":
        raise ValueError(
            f"output_value={output_value!r}: siamese encodes whole texts only (output_value='sentence_embedding')"
        )
    if pool is not None or chunk_size is not None:
        raise ValueError(
            "siamese encodes in one process (a thread per core): drop pool/chunk_size; "
            "for a cluster use siamese encode --engine ray"
        )


def _load_vectorizer(path: Path, config: ModelConfig, raw: dict, own_tokenizer: bool) -> Vectorizer:
    """A model folder's tokenizer.json, checked against config.json's vocab_size."""
    config_file = path / "config.json"
    if own_tokenizer or config.tokenizer == "subwords":
        vectorizer = PretrainedVectorizer.load(path / "tokenizer.json", max_length=config.max_length)
        if not own_tokenizer and vectorizer.vocab_size != raw["vocab_size"]:
            raise ModelError(
                f"{config_file}: vocab_size {raw['vocab_size']} does not match tokenizer.json "
                f"({vectorizer.vocab_size} tokens)"
            )
    else:
        vectorizer = Vectorizer.load(
            path / "tokenizer.json",
            oov_buckets=config.oov_buckets,
            char_ngrams=config.char_ngrams,
            char_buckets=config.char_buckets,
        )
        if vectorizer.vocab_size != raw["vocab_size"]:
            raise ModelError(
                f"{config_file}: vocab_size {raw['vocab_size']} does not match tokenizer.json "
                f"({vectorizer.word_count} words + "
                f"{vectorizer.oov_buckets} oov_buckets + {vectorizer.char_buckets} char_buckets)"
            )
    return vectorizer


def glove_embeddings(path: str, vectorizer: Vectorizer, seed: int) -> tuple[np.ndarray, dict]:
    """An embedding matrix for the vocabulary from GloVe vectors, and how much they cover."""
    vocabulary = vectorizer.vocabulary()
    matrix, coverage = embedding_matrix(
        vocabulary, load_glove(path, words=set(vocabulary) | {w.lower() for w in vocabulary}), seed=seed
    )
    total = vectorizer.word_count  # the buckets (random rows) are not words
    return matrix, {
        "path": str(path),
        "covered": coverage.covered,
        "total": total,
        "fraction": round(coverage.covered / max(total, 1), 4),
        "missing_examples": coverage.missing[:10],
    }
