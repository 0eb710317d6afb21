"""Optional TensorBoard logging of a training (``--log-dir``): the loss of every step and each
epoch's record (loss, validation loss, speed), through torch.utils.tensorboard."""

from __future__ import annotations

import importlib.util
import os

from ..io.extras import MissingExtra, install_hint


def check_log_dir(log_dir: str | os.PathLike | None) -> None:
    """Refuse a log folder when TensorBoard is not installed (before any work is done)."""
    if log_dir is not None and importlib.util.find_spec("tensorboard") is None:
        raise MissingExtra(
            f"--log-dir {log_dir}: TensorBoard logging needs the tensorboard package: {install_hint('board')}"
        )


class TensorBoardLog:
    """Wraps a trainer's step (the loss of every step) and is an ``on_epoch_end`` callback (the
    epoch's record); ``step`` counts the optimiser steps of this run."""

    def __init__(self, log_dir: str | os.PathLike):
        check_log_dir(log_dir)
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(log_dir))
        self.step = 0

    def logged(self, step):
        """``step`` (a batch → its loss tensor) that also logs the loss."""

        def logged_step(batch):
            loss = step(batch)
            self.writer.add_scalar("train/step_loss", float(loss.detach()), self.step)
            self.step += 1
            return loss

        return logged_step

    def __call__(self, trainer) -> None:
        record = trainer.fitted.history[-1]
        for key, value in record.items():
            if key != "epoch" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"epoch/{key}", value, record["epoch"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
