"""The static student's settings (:class:`StaticConfig`) and a distillation run's files
(:class:`DistillRun`), declared once: ``siamese distill`` is generated from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import ConfigError
from .options import check_bounds, option
from .run import DEVICE_HELP, OVERWRITE_HELP

VOCABULARIES = ("subwords", "words")


@dataclass
class StaticConfig:
    """How the static student is built and trained (defaults chosen on validation sets, see
    docs/benchmarks.md "The static student")."""

    dim: int = option(256, "Student width (at most the teacher's).", min=2)  # the table is tokens x dim floats
    vocabulary: str = option("subwords", "subwords (the teacher's WordPiece tokens + frequent corpus words) or words.")
    extra_words: int = option(50_000, "subwords: corpus words added as tokens of their own.", min=0)
    max_vocab: int | None = 100_000  # words: the most frequent corpus words get a vector
    # A seeded sample of the corpus: the teacher's pass over the texts is most of distillation's
    # time. 64,000 of the default corpus's 128,274 texts gave the same student on the sets it does not
    # contain (validation AUC/ρ mean 0.736 vs 0.735; dedupe recall at a matched point on MQP and
    # Quora equal) in 60 % of the time; 16,000 (with 12 epochs) lost 2.8-3.5 points of dedupe recall on InsuranceQA
    # and Quora for 2.7x less time, 8,000 fell under a model2vec student on MQP and Quora (docs/benchmarks.md).
    corpus_sample: int = option(
        64_000,
        "Corpus texts the student learns from: a seeded random sample when the corpus has more (0: all; 16000 with "
        "--epochs 12: ~2.7x faster, a little weaker).",
        min=0,
    )
    epochs: int = option(
        6,
        "Passes over the corpus matching the teacher's vectors (0: the teacher's token vectors only, as model2vec: "
        "no corpus text encoded, ~5x faster, a weaker student).",
        min=0,
    )
    batch_size: int = 1024
    lr: float = option(3e-3, "Adam learning rate for the token vectors and weights.", min=0.0)
    # In-batch similarities: KL from the softmax of the teacher's cosines among a batch's texts to
    # the student's, at this temperature, added with this weight to the direction loss. It teaches
    # which texts are closer than which, not only where each points (validation: +0.01 MSRP val,
    # +0.9 STS-B dev, +0.007 SemEval dev; see docs/benchmarks.md). 0: directions only.
    relational: float = option(
        4.0,
        "Weight of the in-batch similarity term (the student finds the same texts close as the teacher; 0: "
        "match directions only).",
        min=0.0,
    )
    temperature: float = 0.1
    val_fraction: float = 0.02  # corpus texts held out: training keeps the epoch of lowest loss on them
    max_length: int | None = 128
    seed: int = option(0, "The one seed: the held-out texts, the batches, the weights.", min=0, max=2**32 - 1)

    def check(self) -> None:
        """Refuse a setting outside its bounds, with a one-line message."""
        if self.vocabulary not in VOCABULARIES:
            raise ConfigError(f"vocabulary must be one of {', '.join(VOCABULARIES)}, got {self.vocabulary!r}")
        if self.dim < 2 or self.epochs < 0 or self.batch_size < 2 or not self.lr > 0 or self.extra_words < 0:
            raise ConfigError("dim >= 2, epochs >= 0, batch_size >= 2, lr > 0 and extra_words >= 0 are required")
        if not self.relational >= 0 or not self.temperature > 0:
            raise ConfigError(f"relational must be >= 0 and temperature > 0, got {self.relational}, {self.temperature}")
        if not 0 <= self.val_fraction < 0.5:
            raise ConfigError(f"val_fraction must be in [0, 0.5), got {self.val_fraction}")
        check_bounds(self, ConfigError)


@dataclass
class DistillRun:
    """What a distillation reads and writes (the student itself is :class:`StaticConfig`)."""

    out: Optional[Path] = option(
        None, "Model folder to write (a bag-of-words model: every command takes it).", flags=("--out",)
    )
    teacher: str = option(
        "minilm",
        "The model to imitate: minilm (all-MiniLM-L6-v2), mpnet (make mpnet), or a Siamese, "
        "sentence-transformers or Hugging Face folder.",
    )
    data: Optional[list[Path]] = option(
        None,
        "Corpus files (repeat): .txt one text per line, a CSV/TSV column (--column), or a pair file (both "
        "texts). Default: every text of the shared pair sets outside their test splits.",
        flags=("--data",),
    )
    column: Optional[str] = option(None, "The CSV/TSV column holding the corpus texts.")
    fine_tune: Optional[list[Path]] = option(
        None,
        "Labelled pairs to fine-tune the student on afterwards (repeat for several files).",
        flags=("--fine-tune",),
    )
    fine_tune_loss: str = option("mnr", "Loss of the fine-tuning: mnr, cosent, contrastive, triplet, ...")
    fine_tune_epochs: int = option(1, min=1)
    fine_tune_lr: float = option(1e-3, min=0.0)
    val_data: Optional[list[Path]] = option(
        None,
        "Labelled pairs to choose the threshold on (repeat). Default: the shared validation sets.",
        flags=("--val-data",),
    )
    device: str = option("auto", DEVICE_HELP)
    overwrite: bool = option(False, OVERWRITE_HELP, flags=("--overwrite",))
