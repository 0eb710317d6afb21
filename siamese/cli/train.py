"""``siamese train`` and ``distill``: commands that train a model folder. Each parses its options,
calls its Python twin (siamese.training.run.train_run, siamese.distill.pipeline.distill_run) and
prints the report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..config.options import declared_options, from_options, is_path
from ..config.options import option as declare
from ..config.run import TrainRun
from ..config.static import DistillRun, StaticConfig
from ..errors import ConfigError
from .common import (
    JsonOpt,
    emit,
    user_errors,
)
from .declared import declared_command


@dataclass
class TrainCommand:
    """The options of ``siamese train`` that only the command line has: shortcuts into
    ``ModelConfig.encoder_options`` and the output. The rest is declared in
    :class:`~siamese.config.run.TrainRun`, :class:`~siamese.config.configs.ModelConfig` and
    :class:`~siamese.config.configs.TrainConfig`."""

    # encoder_options of ModelConfig: the named ones, then any other as -o KEY=VALUE
    transformer: Optional[str] = declare(
        None,
        "--encoder transformer or --cross: a local Hugging Face model folder, or a name: minilm "
        "(all-MiniLM-L6-v2, the default), mpnet (all-mpnet-base-v2; make mpnet).",
    )
    prior: Optional[str] = declare(
        None,
        "With --cross: a bi-encoder (minilm, mpnet, a sentence-transformers or Siamese model folder) whose "
        "cosine the cross-encoder starts from and corrects; saved inside the model folder.",
        flags=("--prior",),
    )
    pooling: Optional[str] = declare(
        None, "Encoder pooling: mean, max, last, attention (recurrent), cls, pooler (transformer)."
    )
    frozen_layers: int = declare(0, "Transformer: keep the embeddings and the first N layers fixed.", min=0)
    option: Optional[list[str]] = declare(
        None,
        "Other encoder keyword as KEY=VALUE (JSON value), e.g. -o hidden=128 -o kernel_sizes=[2,3].",
        flags=("--option", "-o"),
    )
    quiet: bool = declare(False, "No progress bars.", flags=("--quiet", "-q"))
    as_json: bool = declare(False, cli_type=JsonOpt)


def _train_options() -> tuple[type, ...]:
    from ..config.configs import ModelConfig, TrainConfig

    return (TrainRun, TrainCommand, ModelConfig, TrainConfig)


def _restored(saved: dict) -> dict:
    """Option values saved as JSON, paths as paths again (by their declared types)."""
    options = dict(saved)
    for d in declared_options(*_train_options()):
        value = options.get(d.name)
        if value is not None and is_path(d.type):
            options[d.name] = [Path(v) for v in value] if isinstance(value, list) else Path(value)
    return options


def _legacy_options(checkpoint: Path) -> dict | None:
    """The command-line options a checkpoint written before runs kept their own options saved
    (None for a newer checkpoint: siamese.training.run reads those)."""
    from ..training.loop import read_checkpoint

    saved = read_checkpoint(checkpoint)[2].get("run", {}).get("cli")
    if not saved:
        return None
    defaults = {d.name: d.default for d in declared_options(*_train_options())}  # options added since
    return _restored({**defaults, **saved})


def _encoder_options(pairs: list[str] | None, **named) -> dict:
    """``-o KEY=VALUE`` options (values parsed as JSON, else kept as text) plus the named ones that are set."""
    options = {k: v for k, v in named.items() if v is not None}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _configs(options: dict):
    """The configurations the options give (checked by the run, before any data is read)."""
    from ..config.configs import ModelConfig, TrainConfig

    values = {**options, "loss": options["loss"] or ("hinge" if options["answers"] else None)}
    if options["cross"]:
        bi_encoder_only = options["answers"] or (options["encoder"], options["head"]) != ("lstm", "cosine")
        if bi_encoder_only or options["loss"] not in (None, "triplet"):
            raise ConfigError(
                "--cross trains a cross-encoder on labelled pairs: it takes --transformer, not --answers, "
                "--encoder, --head or --loss"
            )
        values["encoder"] = "transformer"
    elif options["prior"] is not None:
        raise ConfigError("--prior is the bi-encoder a cross-encoder corrects: it needs --cross")
    values["encoder_options"] = _encoder_options(
        options["option"],
        pooling=options["pooling"],
        path=options["transformer"],
        frozen_layers=options["frozen_layers"] or None,
        prior=options["prior"],
    )
    return from_options(ModelConfig, values), from_options(TrainConfig, values)


def _run_train(options: dict) -> None:
    """``siamese train`` with its options as one dict: parsed into a run and its configurations,
    run by :func:`siamese.training.run.train_run`, printed."""
    from ..training.run import train_run

    progress = not options["quiet"]
    resume = options["resume"]
    if resume is not None and not options["data"]:
        legacy = _legacy_options(resume)
        if legacy is None:  # the run's options are in the checkpoint
            report = train_run(TrainRun(resume=resume, overwrite=options["overwrite"]), progress=progress)
            return emit(report.result, options["as_json"], report.lines)
        options = {**legacy, **{k: options[k] for k in ("resume", "quiet", "as_json")}}
    model_config, config = _configs(options)
    report = train_run(from_options(TrainRun, options), model_config, config, progress=progress)
    if report.result:  # a torchrun worker other than rank 0 says nothing
        emit(report.result, options["as_json"], report.lines)


train = user_errors(
    declared_command(
        _run_train,
        *_train_options(),
        doc="Train a Siamese model. To learn your duplicates from labelled pairs use --from minilm: a pretrained "
        "encoder fine-tuned on them, never worse than as it is. Without --from: the LSTM from scratch with the "
        "hard-negative triplet loss; --cross trains a cross-encoder.",
    )
)
train.__name__ = train.__qualname__ = "train"


def _run_distill(options: dict) -> None:
    """``siamese distill`` with its options as one dict: run by :func:`siamese.distill.distill_run`, printed."""
    from ..distill.pipeline import distill_run

    run, config = from_options(DistillRun, options), from_options(StaticConfig, options)
    report = distill_run(run, config, progress=not options["as_json"])
    emit(report.result, options["as_json"], report.lines)


@dataclass
class DistillCommand:
    """The options of ``siamese distill`` that only the command line has."""

    as_json: bool = declare(False, cli_type=JsonOpt)


distill_command = user_errors(
    declared_command(
        _run_distill,
        DistillRun,
        StaticConfig,
        DistillCommand,
        doc="Distil a teacher into a static student: token vectors pooled like the bag of words, ~100x faster "
        "than MiniLM.",
    )
)
distill_command.__name__ = distill_command.__qualname__ = "distill_command"
