"""The training configurations, each option declared once (siamese.config.options): the architecture
(:class:`ModelConfig`, saved as a model folder's config.json), the optimisation
(:class:`TrainConfig`) and the loss's own options (:class:`LossConfig`). ``siamese train`` is
generated from these fields: a new option is one field here (and the code that uses it).

Imports nothing heavy (no torch): the command line reads these declarations when it starts."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

from ..errors import ConfigError, ModelError
from ..io.manifest import Field
from .loss import LossConfig
from .options import check_bounds, option

MODEL_FORMAT = "siamese-model/1"  # config.json's "format" in a Siamese model folder

# What an unset epochs / batch size / learning rate means, per kind of model (one place: the
# trainers and the help read it).
KIND_DEFAULTS = {
    "bi-encoder": {"epochs": 5, "batch_size": 256},
    # the usual fine-tuning recipe of BERT-size models: AdamW with this decay, a warm-up over the
    # first tenth of the steps (unless warmup_steps says otherwise), then a linear decay
    "cross-encoder": {"epochs": 1, "batch_size": 16, "lr": 2e-5, "weight_decay": 0.01, "warmup_share": 0.1},
}


def _kinds(name: str) -> str:
    return ", ".join(f"{values[name]:g} for a {kind}" for kind, values in KIND_DEFAULTS.items() if name in values)


MIN_VOCAB = 16  # [PAD], [UNK] and the other special tokens, and room for words


def _length_range(text: str | None) -> list[int] | None:
    """ "3-5" → [3, 5], "4" → [4, 4]; None stays None."""
    if text is None or isinstance(text, list):
        return text
    lo, _, hi = text.partition("-")
    try:
        return [int(lo), int(hi or lo)]
    except ValueError:
        raise ConfigError(f"--char-ngrams takes lengths like 3-5 or 4, got {text!r}") from None


_BIG = 1 << 24  # ids, buckets: a bound on sizes no real model reaches, so a tampered config cannot ask for more
# Every config.json field, checked before anything is built from it.
MANIFEST_FIELDS = {
    "encoder": Field(str),
    "head": Field(str),
    "loss": Field(str),
    "tokenizer": Field(str),
    "dim": Field(int, optional=True, lo=1, hi=1 << 16),
    "encoder_options": Field(dict),
    "glove": Field(str, optional=True),
    "threshold": Field(float),
    "lowercase": Field(bool),
    "max_vocab": Field(int, optional=True, lo=1, hi=_BIG),
    "min_frequency": Field(int, lo=0),
    "max_length": Field(int, optional=True, lo=1, hi=1 << 20),
    "oov_buckets": Field(int, lo=0, hi=_BIG),
    "char_ngrams": Field(list, optional=True, lo=1, hi=64, item=int),
    "char_buckets": Field(int, lo=1, hi=_BIG),
    "seed": Field(int),
    "vocab_size": Field(int, lo=1, hi=_BIG),
    "info": Field(dict, optional=True),
    "calibration": Field(dict, optional=True),
    "cross": Field(bool),
}


@dataclass
class ModelConfig:
    """Architecture and text hyper-parameters; saved as ``config.json``.

    ``encoder``, ``head`` and ``loss`` are chosen by name (see :mod:`siamese.models.encoders`,
    :mod:`siamese.models.heads`, :mod:`siamese.models.losses`); ``encoder_options`` holds the encoder's own
    keywords (``{"hidden": 256, "pooling": "attention"}``). The defaults are the foundation
    model, so folders saved before these fields existed load unchanged.
    """

    encoder: str = option(
        "lstm", "The encoder (bow: -o ngrams=2 adds word pairs).", names="siamese.models.encoders:ENCODERS"
    )
    dim: int | None = option(None, "LSTM width; embedding width of the other word encoders.", min=1)
    head: str = option("cosine", "The head scoring a pair of vectors.", names="siamese.models.heads:HEADS")
    loss: str = option(
        "triplet",
        "The loss (default triplet; hinge with --answers; distill needs --teacher).",
        names="siamese.models.losses:LOSSES",
        cli_default=None,
    )
    encoder_options: dict = field(default_factory=dict)
    glove: str | None = option(
        None,
        "GloVe vectors (glove.*.txt or .json) to start the word embedding from.",
        cli_type=Optional[Path],
        parse=str,
    )
    lowercase: bool = option(True, "Lowercase the texts.", flags=("--lowercase/--keep-case",))
    max_vocab: int | None = option(50_000, "Vocabulary size cap (0 = no cap).", min=0, parse=lambda v: v or None)
    min_frequency: int = 1
    max_length: int | None = 128
    # Words outside the vocabulary hash into this many extra ids instead of all becoming [UNK]
    # (Keras num_oov_indices): texts sharing an unseen word share its vector.
    oov_buckets: int = option(
        0,
        "Hash words outside the vocabulary into this many extra ids instead of [UNK] (0 = all [UNK]).",
        min=0,
        max=1 << 22,
    )
    # Each word's character n-grams, lo to hi long, hashed into char_buckets ids of their own and
    # pooled by the bag of words apart from the words (fastText's subwords).
    char_ngrams: list[int] | None = option(
        None,
        "Bag of words: also pool each word's character n-grams of these lengths, e.g. 3-5 (fastText subwords).",
        cli_type=Optional[str],
        parse=_length_range,
    )
    char_buckets: int = option(1 << 17, "Ids the character n-grams are hashed into (with --char-ngrams).", min=1)
    # "words": a word vocabulary learned from the training texts (tokenizer.json is a WordLevel
    # model); "subwords": tokenizer.json is a pretrained subword tokenizer (a distilled static
    # student keeps its teacher's WordPiece tokens plus whole corpus words; see siamese.distill).
    tokenizer: str = "words"
    seed: int = 0  # set from TrainConfig.seed when training
    # A cross-encoder (siamese.cross): both texts read together by the transformer of
    # encoder_options["path"] (default minilm); train() builds one instead of a Siamese model.
    cross: bool = option(
        False,
        "Train a cross-encoder (both texts read together by --transformer; pairs only, no vectors): "
        "the most accurate verdicts.",
        flags=("--cross",),
    )

    def encoder_kwargs(self) -> dict:
        """Keywords for :func:`build_encoder`: the options, the width, and whether the head wants unit vectors."""
        from ..models.encoders import encoder_class
        from ..models.heads import HEADS

        options = dict(self.encoder_options)
        cls = encoder_class(self.encoder)
        if self.dim is not None and cls.width_option is not None:
            options.setdefault(cls.width_option, self.dim)
        if self.head in HEADS:
            options["normalize"] = HEADS[self.head].unit_vectors
        if self.char_ngrams:
            options["char_buckets"] = self.char_buckets
        return options

    def check(self) -> None:
        """Refuse unknown names, options and head/loss pairs that cannot train, with a one-line message."""
        from ..data.vocabulary import check_char_ngrams, check_oov_buckets
        from ..models.encoders import ENCODERS, encoder_class
        from ..models.heads import HEADS
        from ..models.losses import check_head_and_loss

        options = dict(self.encoder_options)
        # A cross-encoder's prior bi-encoder (siamese.cross) rides in encoder_options["prior"].
        if self.cross and not isinstance(options.pop("prior", None), (str, type(None))):
            raise ConfigError("encoder_options['prior'] must name a bi-encoder (minilm, mpnet or a folder)")
        encoder_class(self.encoder).check_options(self.encoder, options)
        if self.cross and (
            self.encoder != "transformer" or self.loss not in ("triplet", "bce") or self.head != "cosine"
        ):
            raise ConfigError(
                "a cross-encoder (cross=True) is a transformer trained with bce on labelled pairs: "
                "set encoder='transformer' and no head or other loss"
            )
        if self.head not in HEADS:
            raise ModelError(f"unknown head {self.head!r}; choose one of: {', '.join(HEADS)}")
        check_head_and_loss(self.head, self.loss)
        check_oov_buckets(self.oov_buckets)
        if self.max_vocab is not None and (not isinstance(self.max_vocab, int) or self.max_vocab < MIN_VOCAB):
            raise ConfigError(
                f"max_vocab must be at least {MIN_VOCAB} (the special tokens and some words; None: no cap), "
                f"got {self.max_vocab!r}"
            )
        if self.tokenizer not in ("words", "subwords"):
            raise ConfigError(f"tokenizer must be 'words' or 'subwords', got {self.tokenizer!r}")
        if self.tokenizer == "subwords" and (self.oov_buckets or self.char_ngrams):
            raise ConfigError(
                "oov_buckets and char_ngrams extend a word vocabulary: a subword tokenizer has no unknown words"
            )
        check_char_ngrams(self.char_ngrams, self.char_buckets)
        if self.char_ngrams and not encoder_class(self.encoder).takes_char_ngrams:
            raise ConfigError(f"char_ngrams are pooled by the bag of words only (--encoder bow), not {self.encoder!r}")
        if self.oov_buckets and encoder_class(self.encoder).own_tokenizer:
            raise ConfigError(
                f"oov_buckets hashes words outside a learned vocabulary: encoder {self.encoder!r} "
                "brings its own tokenizer"
            )
        if self.glove and not encoder_class(self.encoder).takes_glove:
            takes = [name for name, cls in ENCODERS.items() if cls.takes_glove]
            raise ConfigError(
                f"encoder {self.encoder!r} does not start from GloVe vectors; these do: {', '.join(takes)}"
            )


@dataclass
class TrainConfig:
    """Optimisation hyper-parameters."""

    epochs: int | None = option(None, f"Passes over the data (default: {_kinds('epochs')}).", min=1)
    batch_size: int | None = option(None, f"Pairs per step (default: {_kinds('batch_size')}).", min=2)
    lr: float | None = option(None, f"Adam learning rate (default: the encoder's own, {_kinds('lr')}).", min=0.0)
    loss_options: LossConfig = field(default_factory=LossConfig)  # the loss itself is ModelConfig.loss
    seed: int = option(0, "The one seed: weights, batches, splits, calibration.", min=0, max=2**32 - 1)
    bucket: bool = True  # group texts of similar length into batches: far less padding
    bucket_span: int = 50  # batches per sorted pool; larger = tighter lengths, less randomness
    precision: str = option(
        "auto",
        "auto (bf16 where the CPU has it natively, else fp32; on a CUDA GPU bf16, else fp16, for transformers), "
        "bf16 (fast, fp32 weights), fp16 (CUDA) or fp32.",
    )
    threshold_metric: str = option("accuracy", "What the validation threshold maximises: accuracy or f1.")
    workers: int | None = option(
        None, "Threads encoding parts of each batch in parallel (default: one per core).", min=1
    )
    warmup_steps: int = option(
        0, "Raise the learning rate linearly over the first N steps (for fine-tuning a transformer).", min=0
    )
    # Weight-space ensembling, "WiSE-FT" (Wortsman et al. 2022): keeps what pretraining knew
    # beyond the fine-tuning data.
    keep_initial: float = option(
        0.0,
        "Transformer: after training, mix this share of the pretrained weights back in (WiSE-FT), e.g. 0.5.",
        min=0.0,
        max=0.99,
    )
    # loss "distill": the model whose cosines the student learns to reproduce: a Siamese or
    # Hugging Face model folder, a name ("mpnet", see siamese.models.pretrained), or a SiameseModel.
    teacher: str | os.PathLike | object | None = option(
        None,
        "With --loss distill: the model to imitate: a Siamese or Hugging Face model folder, or a name "
        "(mpnet: all-mpnet-base-v2, make mpnet; minilm).",
        cli_type=Optional[str],
    )
    calibrate: bool = option(
        True,
        "Fit the similarity -> probability calibration on the validation pairs (skipped, with a note, "
        "when they lack a label or are graded).",
        flags=("--calibrate/--no-calibrate",),
    )
    # Choose the threshold for a target on the validation pairs instead of threshold_metric.
    target_precision: float | None = option(
        None,
        "Set the threshold to the lowest one reaching this precision on the validation pairs (error if none does).",
    )
    target_recall: float | None = option(
        None, "Set the threshold to the highest one reaching this recall on the validation pairs."
    )
    device: str = option("auto", "auto (a GPU when there is one, else the CPU), cpu, cuda, cuda:N or mps.")
    # See siamese.runtime.distributed.gather.
    gather: bool = option(
        True,
        "With several workers: the loss of the whole batch, its vectors gathered from every worker (as one "
        "process); --no-gather: each worker's shard alone (fewer in-batch negatives).",
        flags=("--gather/--no-gather",),
    )
    log_dir: str | None = option(
        None,
        "Write TensorBoard logs here: the loss of every step, each epoch's validation loss (the board extra).",
        cli_type=Optional[Path],
        parse=str,
    )

    def check(self) -> None:
        """The bounds the command line declares, for Python callers too."""
        check_bounds(self, ConfigError)
        if self.threshold_metric not in ("accuracy", "f1"):
            raise ConfigError(f"threshold_metric must be 'accuracy' or 'f1', got {self.threshold_metric!r}")


def jsonable_config(config: TrainConfig) -> dict:
    """The training configuration as JSON (a teacher given as a model in memory is named, not stored)."""
    teacher = config.teacher
    if teacher is not None and not isinstance(teacher, (str, os.PathLike)):
        teacher = "<model in memory>"
    return json.loads(
        json.dumps({**asdict(replace(config, teacher=None)), "teacher": None if teacher is None else str(teacher)})
    )
