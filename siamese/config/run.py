"""A training run's options beyond the model and its optimisation: the files it reads, how they
split, where the model goes, checkpoints, resume and local workers (:class:`TrainRun`).
:func:`siamese.training.run.train_run` takes it; ``siamese train`` is generated from it and from
:class:`~siamese.config.configs.ModelConfig` and :class:`~siamese.config.configs.TrainConfig`.

Also the help of the options every pair-reading command shares (format, columns), written once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .options import option

FORMAT_HELP = "Data format: auto, quora, generic, msrp, paws, twitter-url, sick, sts, semeval, mqp."
TEXT1_HELP = "Column holding the first text."
TEXT2_HELP = "Column holding the second text."
LABEL_HELP = "Column holding the 0/1 label."
DEVICE_HELP = "auto (a GPU when there is one, else the CPU), cpu, cuda, cuda:N or mps."
OVERWRITE_HELP = (
    "Replace --out even when it is a folder of other files or another kind of siamese folder (by default "
    "only a siamese folder of the same kind is replaced)."
)


@dataclass
class TrainRun:
    """What a training reads and writes, and how it runs (the model and its optimisation are
    :class:`~siamese.config.configs.ModelConfig` and :class:`~siamese.config.configs.TrainConfig`)."""

    data: Optional[list[Path]] = option(
        None, "Labelled pairs to train on (repeat for several files).", flags=("--data",)
    )
    out: Optional[Path] = option(None, "Model folder to write (only written if training succeeds).", flags=("--out",))
    from_: Optional[str] = option(
        None,
        "Learn from the labels starting from a pretrained encoder: minilm, mpnet, a sentence-transformers folder "
        "or a Siamese transformer model folder (the recommended way for 50-5,000 labels). Its top layers are "
        "fine-tuned, the epochs chosen by cross-validation on --data grouped by question; when that does not "
        "beat the encoder as it is, the encoder is kept with its threshold set on the labels.",
        flags=("--from",),
    )
    weight: Optional[list[float]] = option(
        None,
        "Sampling weight per --data file, in the same order (default 1 each): 2 draws a set twice per epoch, "
        "0.5 half of it.",
        min=0.0,
    )
    val_data: Optional[Path] = option(None, "Validation pairs (both labels). Default: a split of --data.")
    val_fraction: float = option(
        0.1, "Share of --data held out for validation when --val-data is not given.", min=0.0, max=0.9
    )
    test_fraction: float = option(
        0.0,
        "Share of --data held out as a test split (whole connected groups of the pair graph: no text on both "
        "sides), written as test.csv into the model folder and evaluated after training.",
        min=0.0,
        max=0.9,
    )
    format: str = option("auto", FORMAT_HELP, flags=("--format",))
    text1: Optional[str] = option(None, TEXT1_HELP, flags=("--text1",))
    text2: Optional[str] = option(None, TEXT2_HELP, flags=("--text2",))
    label: Optional[str] = option(None, LABEL_HELP, flags=("--label",))
    answers: bool = option(
        False,
        "--data/--val-data are answer-selection sets (TrecQA CSV qtext,label,atext or a WikiQA folder): "
        "train on (question, right, wrong) triplets, report MAP/MRR.",
        flags=("--answers",),
    )
    negatives: int = option(5, "With --answers: wrong answers drawn per right answer.", min=1)
    checkpoint: Optional[Path] = option(
        None,
        "After every epoch, rewrite this folder: a model folder of that epoch's weights plus what --resume needs.",
    )
    resume: Optional[Path] = option(
        None,
        "Continue the killed run that wrote this --checkpoint folder (its options are read from it; it ends "
        "after the same epochs).",
    )
    nproc: int = option(
        1,
        "Train on N local worker processes (torch.distributed: DDP, gloo on CPUs, nccl on GPUs), each on its "
        "shard of every batch; across machines use torchrun --nnodes M --nproc-per-node N -m siamese train ...",
        min=1,
    )
    overwrite: bool = option(False, OVERWRITE_HELP, flags=("--overwrite",))
