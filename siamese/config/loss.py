"""A loss's own options (margin, scale), declared as command-line options (siamese.config.options).
Torch-free and below siamese.models.losses and siamese.config.configs, which both read it."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .options import option


@dataclass
class LossConfig:
    """A loss's own hyper-parameters (``TrainConfig.loss_options``); None: the loss's default.
    A value the chosen loss does not use is refused (:func:`siamese.models.losses.build_loss`), not ignored."""

    margin: float | None = option(
        None,
        "Loss margin: how far a wrong answer must stay below the right one.",
        names="siamese.models.losses:margins",
    )
    scale: float | None = option(
        None, "Loss scale of the softmax losses: cosines are multiplied by it.", names="siamese.models.losses:scales"
    )

    def check(self) -> None:
        """Refuse a negative margin or a scale that is not positive."""
        if self.margin is not None and not self.margin >= 0:
            raise ConfigError(f"the loss margin must be >= 0, got {self.margin}")
        if self.scale is not None and not self.scale > 0:
            raise ConfigError(f"the loss scale must be > 0, got {self.scale}")
