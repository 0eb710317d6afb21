"""The static student's settings, apart from its (torch) code so the CLI reads defaults cheaply."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

VOCABULARIES = ("subwords", "words")


@dataclass
class StaticConfig:
    """How the static student is built and trained (defaults chosen on validation sets, see
    docs/benchmarks.md "The static student")."""

    dim: int = 256  # student width (<= the teacher's): the table is tokens x dim floats
    vocabulary: str = "subwords"  # the teacher's WordPiece tokens + corpus words; or "words"
    extra_words: int = 50_000  # subwords: corpus words (seen twice or more) added as tokens of their own
    max_vocab: int | None = 100_000  # words: the most frequent corpus words get a vector
    epochs: int = 6
    batch_size: int = 1024
    lr: float = 3e-3
    # In-batch similarities: KL from the softmax of the teacher's cosines among a batch's texts to
    # the student's, at this temperature, added with this weight to the direction loss. It teaches
    # which texts are closer than which, not only where each points (validation: +0.01 MSRP val,
    # +0.9 STS-B dev, +0.007 SemEval dev; see docs/benchmarks.md). 0: directions only.
    relational: float = 4.0
    temperature: float = 0.1
    val_fraction: float = 0.02  # corpus texts held out: training keeps the epoch of lowest loss on them
    max_length: int | None = 128
    seed: int = 0

    def check(self) -> None:
        if self.vocabulary not in VOCABULARIES:
            raise ConfigError(f"vocabulary must be one of {', '.join(VOCABULARIES)}, got {self.vocabulary!r}")
        if self.dim < 2 or self.epochs < 0 or self.batch_size < 2 or not self.lr > 0 or self.extra_words < 0:
            raise ConfigError("dim >= 2, epochs >= 0, batch_size >= 2, lr > 0 and extra_words >= 0 are required")
        if not self.relational >= 0 or not self.temperature > 0:
            raise ConfigError(f"relational must be >= 0 and temperature > 0, got {self.relational}, {self.temperature}")
        if not 0 <= self.val_fraction < 0.5:
            raise ConfigError(f"val_fraction must be in [0, 0.5), got {self.val_fraction}")
