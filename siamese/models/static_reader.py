"""A static student's folder (``siamese distill``: a weighted mean of token vectors) opened for
encoding without torch: NumPy and SciPy pool the vectors :meth:`SiameseModel.encode` gives (the
same sums, to float rounding), in a process that never imports torch — ~200 MB of resident
memory and about a second of start-up less for a corpus dedupe.

:func:`open_static` answers None for any folder it does not read exactly as the full model does
(word pairs, character n-grams, another head, anything unexpected): the caller then loads
:class:`siamese.SiameseModel`, which also reports what is wrong with a damaged folder."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix

from ..config.configs import MANIFEST_FIELDS, ModelConfig
from ..data.vocabulary import PretrainedVectorizer, Vectorizer
from ..errors import ModelError
from ..io.atomic import clear_leftovers
from ..io.manifest import check_fields
from .pretrained import folder_format

MODEL_FORMAT = "siamese-model/1"  # siamese.models.siamese.FORMAT and DEFAULT_THRESHOLD (that module imports torch)
DEFAULT_THRESHOLD = 0.7
# siamese.models.siamese._NEW_FIELDS: left out of the fingerprint while at their defaults
NEW_FIELDS = ("loss", "encoder_options", "glove", "oov_buckets", "char_ngrams", "char_buckets", "tokenizer", "cross")
CHUNK = 1 << 16  # texts pooled at a time


class StaticModel:
    """Encodes like the static student's :class:`SiameseModel` (``encode``, ``fingerprint``,
    ``threshold``, ``dim``, ``config``, ``path``) for the commands that only need its vectors."""

    device = "cpu"

    def __init__(
        self, path: Path, config: ModelConfig, vectorizer, table: np.ndarray, log_weight: np.ndarray, threshold: float
    ):
        self.path, self.config, self.vectorizer = path, config, vectorizer
        self.table, self.log_weight, self.threshold = table, log_weight, threshold
        self.weight = np.exp(log_weight[:, 0]).astype(np.float32)
        self.dim = table.shape[1]

    def encode(self, texts, *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Unit vectors, one row per text (a ``str``: one vector); ``batch_size`` and ``progress`` are
        accepted for :meth:`SiameseModel.encode`'s callers (the pooling takes 65,536 texts a time)."""
        if isinstance(texts, str):
            return self.encode([texts])[0]
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), CHUNK):
            ids, lengths = self.vectorizer.encode_flat(texts[start : start + CHUNK])
            rows = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=rows[1:])
            bag = csr_matrix((self.weight[ids], ids, rows), shape=(len(lengths), len(self.table)))
            vectors = np.asarray(bag @ self.table, dtype=np.float32)  # weighted sums; the mean's total cancels
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # F.normalize's floor
            out[start : start + len(lengths)] = vectors
        return out

    def encoding_precision(self) -> str:
        """fp32: a static student's vectors are the same on every CPU (as the full model's)."""
        return "fp32"

    def fingerprint(self) -> str:
        """:meth:`SiameseModel.fingerprint` of the same folder."""
        h = hashlib.sha256()
        defaults = asdict(ModelConfig())
        config = {k: v for k, v in asdict(self.config).items() if not (k in NEW_FIELDS and defaults[k] == v)}
        h.update(json.dumps(config, sort_keys=True).encode())
        h.update(self.vectorizer.tokenizer.to_str().encode())
        for name, array in sorted({"embedding.weight": self.table, "log_weight.weight": self.log_weight}.items()):
            h.update(name.encode())
            h.update(np.ascontiguousarray(array).tobytes())
        return h.hexdigest()


def open_static(path: str | os.PathLike, device: str = "auto") -> StaticModel | None:
    """The folder as a :class:`StaticModel`, or None where the full model must be loaded (not a
    plain cosine bag of tokens on the CPU, or anything this reader does not check as the full load does)."""
    path = Path(path)
    if str(device).strip().lower() not in ("auto", "cpu"):  # a static student encodes fast on the CPU
        return None
    try:
        clear_leftovers(path)  # what a killed save of this folder left beside it, as the full load does
        if folder_format(path) != MODEL_FORMAT:
            return None
        raw = json.loads((path / "config.json").read_text(encoding="utf-8"))
        check_fields(raw, MANIFEST_FIELDS, path / "config.json", ModelError)  # as the full load checks them
        known = {f.name for f in fields(ModelConfig)}
        config = ModelConfig(**{k: v for k, v in raw.items() if k in known})  # check() would import the encoders
        options = dict(config.encoder_options or {})
        plain = options.pop("embedding_dim", config.dim) == config.dim and not options  # no word pairs, no extras
        if config.encoder != "bow" or config.head != "cosine" or config.char_ngrams or not plain:
            return None
        vectorizer = _vectorizer(path, config)
        from safetensors.numpy import load_file

        weights = load_file(path / "model.safetensors")
        table, log_weight = weights.pop("embedding.weight"), weights.pop("log_weight.weight")
        if weights or table.shape != (raw["vocab_size"], config.dim) or log_weight.shape != (raw["vocab_size"], 1):
            return None
        if vectorizer.vocab_size != raw["vocab_size"] or table.dtype != np.float32 or log_weight.dtype != np.float32:
            return None
        if not (np.isfinite(table).all() and np.isfinite(log_weight).all()):
            return None
        threshold = min(max(float(raw.get("threshold", DEFAULT_THRESHOLD)), -1.0), 1.0)  # the cosine's range
    except Exception:  # anything unexpected: the full load reads the folder and says what is wrong
        return None
    return StaticModel(path.resolve(), config, vectorizer, table, log_weight, threshold)


def _vectorizer(path: Path, config: ModelConfig):
    if config.tokenizer == "subwords":
        return PretrainedVectorizer.load(path / "tokenizer.json", max_length=config.max_length)
    return Vectorizer.load(
        path / "tokenizer.json", oov_buckets=config.oov_buckets, char_ngrams=None, char_buckets=config.char_buckets
    )
