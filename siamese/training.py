"""Training the Siamese model: length-bucketed batches, one encoder call per batch, the epochs run
by :class:`siamese.trainer.Trainer` (validation, best weights, checkpoints, resume), and a
threshold and calibration chosen on validation pairs at the end."""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from . import kernels
from .calibration import check_targets, data_record, fit_calibrator
from .data import Pairs
from .devices import is_cpu, resolve_device, to_device
from .distributed import World, gather, mean_over_workers, process_group
from .distributed import world as current_world
from .encoders import default_lr, encoder_class
from .errors import ConfigError, DataError, ModelError
from .evaluation import choose_threshold, threshold_for_target
from .losses import LossConfig, PairLoss, build_loss
from .model import ModelConfig, SiameseModel, check_trainable
from .optim import LazyAdam
from .parallel import ParallelEncoder, single_threaded_ops
from .precision import PRECISIONS, grad_scaler, resolve_precision  # noqa: F401 (re-exported)
from .precision import autocast as precision_autocast
from .progress import tqdm
from .teachers import TeacherVectors, load_teacher
from .text import pad
from .trainer import Checkpoint, Trainer, read_checkpoint


@dataclass
class TrainConfig:
    """Optimisation hyper-parameters (the seed's values by default)."""

    epochs: int = 5
    batch_size: int = 256
    lr: float | None = None  # None: the encoder's default (0.01 for the seed LSTM, 2e-6 for a transformer)
    # The loss's own hyper-parameters (margin, scale; None: its default, 0.25 triplet, 0.2 hinge,
    # 0.5 contrastive margins, 20 mnr/cosent scale). The loss itself is ModelConfig.loss.
    loss_options: LossConfig = field(default_factory=LossConfig)
    seed: int = 0  # the one seed: weights (ModelConfig.seed is set from it), batches, calibration
    bucket: bool = True  # group texts of similar length into batches: far less padding
    bucket_span: int = 50  # batches per sorted pool; larger = tighter lengths, less randomness
    # "bf16": matmuls in bfloat16 (fp32 weights); "fp16" (CUDA, with a gradient scaler); "fp32"; "auto": bf16 if
    # the CPU has it natively, and on a CUDA GPU bf16 (else fp16) for transformers, fp32 for the word encoders
    precision: str = "auto"
    threshold_metric: str = "accuracy"  # what the validation threshold maximises: accuracy | f1
    workers: int | None = None  # threads encoding length groups of a batch in parallel; None = one per core
    warmup_steps: int = 0  # raise the learning rate linearly over the first steps (fine-tuning a pretrained encoder)
    # Pretrained encoders: after training, mix this share of the starting weights back in
    # (weight-space ensembling, "WiSE-FT", Wortsman et al. 2022): keeps what pretraining knew
    # beyond the fine-tuning data. 0 keeps the trained weights.
    keep_initial: float = 0.0
    # loss "distill": the model whose cosines the student learns to reproduce: a Siamese or
    # Hugging Face model folder, a name ("mpnet", see siamese.pretrained), or a SiameseModel.
    teacher: str | os.PathLike | SiameseModel | None = None
    # Fit a similarity -> probability calibrator on the validation pairs (siamese.calibration);
    # skipped, with a note in the summary, when they lack a label or are graded.
    calibrate: bool = True
    # Choose the threshold for a target on the validation pairs instead of threshold_metric:
    # the lowest reaching this precision, or the highest reaching this recall.
    target_precision: float | None = None
    target_recall: float | None = None
    device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, cuda:N, mps
    # Several workers (torchrun, --nproc): the loss of the whole global batch, its vectors gathered
    # from every worker (as one process computes it); False: each worker's own shard only (1/N
    # of the in-batch negatives). See siamese.distributed.gather.
    gather: bool = True


@contextlib.contextmanager
def gc_frozen():
    """Keep the objects that exist before training (torch's modules, the data) out of the garbage
    collector's scans: a full collection over them took ~0.14 s, twice in a short training run."""
    already = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not already:
            gc.unfreeze()


def seed_everything(seed: int) -> np.random.Generator:
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def batches(
    lengths: np.ndarray,
    batch_size: int,
    rng: np.random.Generator,
    *,
    bucket: bool = True,
    span: int = 50,
    rows: np.ndarray | None = None,
    min_rows: int = 2,
) -> list[np.ndarray]:
    """Shuffled index batches; with ``bucket`` each pool of ``span`` batches is sorted by length
    before cutting, so a batch pads to a length close to its texts' own. ``rows`` (default: all)
    are the rows this epoch draws, repeats allowed. A last batch under ``min_rows`` joins the one before."""
    order = rng.permutation(len(lengths)) if rows is None else rng.permutation(rows)
    if bucket:
        pool = batch_size * span
        order = np.concatenate(
            [
                chunk[np.argsort(lengths[chunk], kind="stable")]
                for chunk in np.split(order, range(pool, len(order), pool))
            ]
        )
    out = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if len(out) > 1 and len(out[-1]) < min_rows:  # the in-batch losses need a negative (per worker when sharded)
        out[-2:] = [np.concatenate(out[-2:])]
    rng.shuffle(out)
    return out


def weighted_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One epoch's rows when row i should be drawn ``weights[i]`` times on average: its whole
    part every time, its fraction at random."""
    whole = np.floor(weights).astype(np.int64)
    extra = rng.random(len(weights)) < (weights - whole)
    return np.repeat(np.arange(len(weights)), whole + extra)


class PairTensors:
    """Token ids of every side of a set of pairs (or triplets), padded per batch on demand, and
    where a teacher is given, the row of each text's teacher vector."""

    def __init__(self, model: SiameseModel, pairs: Pairs, graded: bool = False, teacher: TeacherVectors | None = None):
        self.sides = [model.vectorizer.encode(texts) for texts in pairs.sides()]
        self.pad_id = model.vectorizer.pad_id
        self.teacher = teacher
        self.teacher_rows = [teacher.rows(texts) for texts in pairs.sides()] if teacher is not None else None
        self.lengths = np.max([[len(s) for s in side] for side in self.sides], axis=0)
        # the graded scores (STS-B, SICK) for losses that rank by them, else the 0/1 labels
        targets = pairs.scores if graded and getattr(pairs, "scores", None) is not None else pairs.labels
        self.labels = torch.as_tensor(np.asarray(targets, dtype=np.float32)) if targets is not None else None
        self.weights = pairs.weights

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """All sides stacked: rows 0..n-1 are side 1, n..2n-1 side 2, … (one encoder call)."""
        ids, lengths = pad([side[i] for side in self.sides for i in rows], self.pad_id)
        return torch.from_numpy(ids), torch.from_numpy(lengths)

    def teacher_batch(self, rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        """The teacher's vectors of the batch, one (n, teacher width) tensor per side."""
        return tuple(self.teacher.vectors[side[rows]] for side in self.teacher_rows)


class BatchLoss(torch.nn.Module):
    """A batch (its sides stacked) → the loss: encoder, head and loss in one module's forward, the
    unit DistributedDataParallel wraps, so every trained weight's gradient is averaged over the
    workers. ``sizes`` (several workers): the rows each worker holds; the sides, labels and teacher
    vectors are then gathered and the loss is the whole global batch's."""

    def __init__(self, encoder: torch.nn.Module, head: torch.nn.Module, runner: ParallelEncoder, loss_fn: PairLoss):
        super().__init__()
        self.encoder, self.head = encoder, head
        self.runner, self.loss_fn = runner, [loss_fn]  # in a list: not a submodule (no weights, not DDP's business)

    def forward(
        self,
        ids: torch.Tensor,
        lengths: torch.Tensor,
        n: int,
        labels: torch.Tensor | None,
        teacher: tuple[torch.Tensor, ...] | None,
        sizes: list[int] | None = None,
    ) -> torch.Tensor:
        sides = self.runner(ids, lengths).float().split(n)  # n rows per side
        if sizes is not None:
            sides = [gather(side, sizes) for side in sides]
            labels = gather(labels, sizes) if labels is not None else None
            teacher = tuple(gather(t, sizes) for t in teacher) if teacher is not None else None
        extra = {"teacher": teacher} if teacher is not None else {}
        return self.loss_fn[0](
            sides[0], sides[1], negative=sides[2] if len(sides) > 2 else None, labels=labels, head=self.head, **extra
        )


def training_data(data, loss_fn: PairLoss):
    """What a loss trains on: the duplicates (in-batch losses), every labelled pair, every pair
    whatever its label (distillation), or triplets."""
    if data.triplets:
        if loss_fn.trains_on == "labelled":
            raise ConfigError(
                f"{data.source}: triplets train the in-batch losses (triplet, hinge, mnr) and distill, "
                "not a labelled-pair loss"
            )
        return data
    if loss_fn.trains_on == "positives":
        return data.positives()
    if loss_fn.trains_on == "pairs":
        return data
    if len(set(np.asarray(data.labels).tolist())) < 2:
        raise DataError(f"{data.source}: this loss trains on labelled pairs and needs both labels (0 and 1)")
    return data


def train(
    train_pairs: Pairs,
    val_pairs: Pairs | None = None,
    *,
    model_config: ModelConfig | None = None,
    config: TrainConfig | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    run: dict | None = None,
    progress: bool = True,
    initial: SiameseModel | None = None,
) -> SiameseModel:
    """Train a Siamese model. The loss (``model_config.loss``) says what it learns from: the
    duplicate pairs of ``train_pairs`` (triplet, hinge, mnr; the rest of the batch gives the
    negatives), all its labelled pairs (bce, contrastive), or (anchor, positive, negative)
    triplets (:class:`siamese.answers.Triplets`). ``val_pairs`` (both labels) give the
    validation loss and the decision threshold. Returns the model with the best validation
    weights; the summary is in ``model.info["training"]``.

    ``initial``: start from this model (its vocabulary, architecture and weights; a copy is
    trained), e.g. a distilled static student; ``model_config`` may then only change the loss.

    ``checkpoint``: a folder rewritten (atomically) after every epoch: a model folder of that
    epoch's weights plus the optimizer, scheduler and random-generator state and ``run`` (JSON the
    caller wants back on resume, e.g. its command line). ``resume``: continue the run saved there,
    called with the same data and configuration; it ends after the same number of epochs, as if
    it had never stopped.

    Under torchrun (or ``siamese train --nproc N``) each worker calls this with the same arguments:
    the workers train one DDP model on shards of each batch (see :mod:`siamese.distributed`);
    rank 0 alone logs, writes the checkpoint and chooses the threshold and calibration, so save
    rank 0's model (the others return the same weights without them)."""
    config = config or TrainConfig()
    if model_config is not None and model_config.cross:
        from .cross.training import train_from_configs

        return train_from_configs(
            train_pairs,
            val_pairs,
            model_config,
            config,
            checkpoint=checkpoint,
            resume=resume,
            run=run,
            progress=progress,
        )
    world = current_world()
    with process_group(world, resolve_device(config.device)):
        return _train(
            train_pairs,
            val_pairs,
            model_config=model_config,
            config=config,
            checkpoint=checkpoint,
            resume=resume,
            run=run,
            progress=progress,
            initial=initial,
            world=world,
        )


def _train(
    train_pairs: Pairs,
    val_pairs: Pairs | None,
    *,
    model_config: ModelConfig | None,
    config: TrainConfig,
    checkpoint,
    resume: bool,
    run: dict | None,
    progress: bool,
    initial: SiameseModel | None,
    world: World,
) -> SiameseModel:
    resume_state = _resume_state(checkpoint, config) if resume else None
    if initial is not None:
        model_config = replace(initial.config, loss=model_config.loss if model_config else initial.config.loss)
    model_config = model_config or ModelConfig()
    if model_config.seed not in (0, config.seed):  # 0: ModelConfig's default, i.e. not chosen there
        raise ConfigError(
            f"two seeds: ModelConfig.seed={model_config.seed}, TrainConfig.seed={config.seed}; "
            "set TrainConfig.seed only (it seeds the weights too)"
        )
    model_config = replace(model_config, seed=config.seed)
    model_config.check()
    check_trainable(model_config)  # before a teacher encodes anything
    device = resolve_device(config.device)
    # mixed precision on a GPU where it pays: a transformer's large matmuls (cuDNN's LSTM is fast in fp32)
    precision = resolve_precision(config.precision, device, mixed_on_gpu=encoder_class(model_config.encoder).pretrained)
    progress = progress and world.main
    if world.distributed and config.batch_size < 2 * world.size:
        raise ConfigError(
            f"batch size {config.batch_size} for {world.size} workers: give each at least 2 rows "
            f"(--batch-size {2 * world.size} or more)"
        )
    if config.threshold_metric not in ("accuracy", "f1"):
        raise ConfigError(f"threshold_metric must be 'accuracy' or 'f1', got {config.threshold_metric!r}")
    check_targets(config.target_precision, config.target_recall)
    targeted = config.target_precision is not None or config.target_recall is not None
    if targeted and not (val_pairs is not None and not val_pairs.triplets and len(set(val_pairs.labels.tolist())) == 2):
        raise DataError(
            "a target precision or recall is chosen on validation pairs with both labels (0 and 1); "
            "these have not (give --val-data with both)"
        )
    if not 0.0 <= config.keep_initial < 1.0:
        raise ConfigError(f"keep_initial must be in [0, 1), got {config.keep_initial}")
    if config.keep_initial and not encoder_class(model_config.encoder).pretrained:
        raise ConfigError(
            f"keep_initial mixes pretrained weights back in: encoder {model_config.encoder!r} starts from "
            "random weights (use it with --encoder transformer)"
        )
    rng = seed_everything(config.seed)

    loss_fn = build_loss(model_config.loss, config.loss_options)
    check_teacher(config, model_config, loss_fn)
    data = training_data(train_pairs, loss_fn)
    if len(data) < 2:
        what = {"positives": "duplicate pairs (label 1)", "labelled": "labelled pairs"}.get(loss_fn.trains_on, "pairs")
        raise DataError(
            f"{train_pairs.source}: need at least 2 {what} to train with loss {model_config.loss!r}, found {len(data)}"
        )
    val_set = training_data(val_pairs, loss_fn) if val_pairs is not None and len(val_pairs) else None
    teacher = teacher_info = None
    if loss_fn.uses_teacher:  # every distinct training and validation text, encoded once, before the student is built
        teacher_model, teacher_info = load_teacher(config.teacher, max_length=model_config.max_length, device=device)
        texts = [t for d in (data, val_set) if d is not None for side in d.sides() for t in side]
        teacher = TeacherVectors.encode(teacher_model, texts, progress=progress)
        del teacher_model  # hundreds of MB for a large teacher; only its vectors are needed now
        teacher_info.update(texts=len(teacher.index), seconds=round(teacher.seconds, 3))
    # The vocabulary comes from every training text, not only those the loss trains on: a word
    # seen only in non-duplicates still keeps its own (untrained) vector, so texts sharing it
    # still look alike, which is much of the signal on long, rare-word texts (MSRP, forums).
    if initial is not None:
        model = SiameseModel(
            initial.vectorizer,
            copy.deepcopy(initial.encoder),
            model_config,
            dict(initial.info),
            copy.deepcopy(initial.head),
        )
    else:
        model = SiameseModel.build([t for side in train_pairs.sides() for t in side], model_config)
    model.to(device)
    encoder, head = model.encoder, model.head
    graded = getattr(loss_fn, "uses_scores", False)
    train_data = PairTensors(model, data, graded, teacher)
    val_data = PairTensors(model, val_set, graded, teacher) if val_set is not None and len(val_set) >= 2 else None

    initial = {k: v.detach().clone() for k, v in encoder.state_dict().items()} if config.keep_initial else None
    lr = config.lr if config.lr is not None else default_lr(model_config.encoder)
    trainable = [p for p in [*encoder.parameters(), *head.parameters()] if p.requires_grad]
    sparse = [
        p
        for m in encoder.modules()
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse
        for p in m.parameters()
    ]
    dense = [p for p in trainable if all(p is not s for s in sparse)]
    optimizers = [torch.optim.Adam(dense, lr=lr, fused=True)] if dense else []  # fused: one kernel, ~3x faster steps
    if sparse:  # lazy Adam: only the embedding rows seen in the batch are updated
        optimizers.append(LazyAdam(sparse, lr=lr))
    # Length groups on threads are the CPU's way to use every core in one process; workers (each
    # with cores / N torch threads) replace them in a distributed run, and a GPU takes batches whole.
    runner = ParallelEncoder(
        encoder,
        1 if world.distributed or not is_cpu(device) else config.workers,
        precision_autocast(precision, device.type),
    )
    step_loss = BatchLoss(encoder, head, runner, loss_fn)
    net = step_loss
    if world.distributed:
        from torch.nn.parallel import DistributedDataParallel

        # find_unused_parameters: a pretrained transformer's pooler gets no gradient with mean pooling
        net = DistributedDataParallel(
            step_loss,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=encoder.pretrained,
        )

    def batch_loss(data: PairTensors, rows: np.ndarray, sharded: bool = False) -> torch.Tensor:
        """The loss of ``rows``; ``sharded`` (a training step of several workers): this worker
        encodes its shard of them (see siamese.distributed)."""
        sizes = None
        if sharded:
            sizes = world.shard_sizes(len(rows)) if config.gather else None
            rows = world.shard(rows)
        ids, lengths = data.batch(rows)
        labels = to_device(data.labels[rows], device) if data.labels is not None else None
        teacher = tuple(to_device(t, device) for t in data.teacher_batch(rows)) if data.teacher is not None else None
        return (net if sharded else step_loss)(
            to_device(ids, device), to_device(lengths, device), len(rows), labels, teacher, sizes
        )

    modules = torch.nn.ModuleList([encoder, head])
    # Linear warm-up: early steps of a pretrained encoder otherwise take full-size Adam steps on noisy moments.
    schedulers = (
        [
            torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / (config.warmup_steps + 1)))
            for opt in optimizers
        ]
        if config.warmup_steps
        else []
    )
    callbacks = (
        [Checkpoint(checkpoint, model.write, {"train_config": _jsonable(config), "run": run or {}})]
        if checkpoint and world.main
        else []
    )
    trainer = Trainer(
        modules,
        optimizers,
        epochs=config.epochs,
        rng=rng,
        schedulers=schedulers,
        progress=progress,
        item="pair",
        on_epoch_end=callbacks,
        after_backward=runner.backward,
        scaler=grad_scaler(precision, device),
    )
    if resume_state is not None:
        try:
            trainer.restore(*resume_state)
        except (RuntimeError, KeyError, ValueError) as e:  # other weights' shapes, another vocabulary
            raise ModelError(
                f"{checkpoint}: the checkpoint does not fit this model and data ({str(e).splitlines()[0]})"
            ) from None

    def plan(rng: np.random.Generator) -> list[np.ndarray]:
        rows = weighted_rows(train_data.weights, rng) if train_data.weights is not None else None
        return batches(
            train_data.lengths,
            config.batch_size,
            rng,
            bucket=config.bucket,
            span=config.bucket_span,
            rows=rows,
            min_rows=2 * world.size,
        )

    validate = (
        (lambda: validation_loss(modules, val_data, config, batch_loss, world, device))
        if val_data is not None
        else None
    )
    if precision == "bf16" and is_cpu(device):
        kernels.load()  # a first build (~30 s, once per install) must not count as training time
    started = time.perf_counter()
    with single_threaded_ops(runner.workers > 1), gc_frozen():
        fitted = trainer.fit(
            plan, lambda rows: batch_loss(train_data, rows, sharded=world.distributed), validate=validate
        )
    modules.load_state_dict(fitted.best_weights)
    if initial is not None:
        mix_weights(encoder, initial, config.keep_initial)
    modules.eval()
    runner.close()
    if not world.main:  # the threshold, calibration and summary are rank 0's
        model.info["training"] = {
            "rank": world.rank,
            "workers": world.size,
            "best_epoch": fitted.best_epoch,
            "history": fitted.history,
        }
        return model
    threshold_info = {}
    both_labels = val_pairs is not None and not val_pairs.triplets and len(set(val_pairs.labels.tolist())) == 2
    if both_labels:
        sims = model.similarity(val_pairs.text1, val_pairs.text2)
        if targeted:
            threshold, threshold_info = threshold_for_target(
                sims, val_pairs.labels, precision=config.target_precision, recall=config.target_recall
            )
        else:
            threshold, threshold_info = choose_threshold(sims, val_pairs.labels, metric=config.threshold_metric)
        model.set_threshold(threshold)
    elif progress:
        tqdm.write(f"no validation pairs with both labels: keeping threshold {model.threshold}")
    calibration = {"fitted": False}
    if not config.calibrate:
        calibration["note"] = "not asked for"
    elif val_pairs is not None and val_pairs.triplets:
        calibration["note"] = "skipped: the validation data are triplets, not labelled pairs"
    elif not both_labels:
        calibration["note"] = "skipped: the validation pairs do not have both labels"
    elif getattr(val_pairs, "scores", None) is not None:
        calibration["note"] = "skipped: the validation pairs are graded, with scores rather than 0/1 labels"
    else:
        try:
            model.calibrator = fit_calibrator(sims, val_pairs.labels, seed=config.seed)
            # the validation pairs may be a split of the file: "pairs" says how many of it
            model.calibrator = replace(model.calibrator, fitted_on={**data_record(val_pairs), "split": "validation"})
            calibration = {"fitted": True, "method": model.calibrator.method}
        except DataError as e:  # e.g. a single duplicate among the validation pairs
            calibration["note"] = f"skipped: {e}"
    if progress and config.calibrate and not calibration["fitted"]:
        tqdm.write(f"not calibrated ({calibration['note']})")
    model.info["training"] = {
        "config": {
            **asdict(replace(config, teacher=None)),
            "teacher": teacher_info and teacher_info["source"],
            "lr": lr,
            "margin": loss_fn.margin,
            "scale": loss_fn.scale,
        },
        "precision": precision,
        "device": str(device),
        "workers": world.size,
        "loss": model_config.loss,
        **({"teacher": teacher_info} if teacher_info else {}),
        "train_pairs": len(data),
        "val_pairs": 0 if val_pairs is None else len(val_pairs),
        "best_epoch": fitted.best_epoch,
        "history": fitted.history,
        "seconds": round(time.perf_counter() - started, 3),
        "train_seconds": round(fitted.seconds, 3),
        "warmup_seconds": None if fitted.warmup_seconds is None else round(fitted.warmup_seconds, 3),
        "pairs_per_second": fitted.per_second,  # after the warm-up step
        "threshold": model.threshold,
        "threshold_choice": threshold_info,
        "calibration": calibration,
        "sources": [train_pairs.source] + ([val_pairs.source] if val_pairs is not None else []),
    }
    return model


def _jsonable(config: TrainConfig) -> dict:
    """The training configuration as JSON (a teacher given as a model in memory is named, not stored)."""
    teacher = config.teacher
    if teacher is not None and not isinstance(teacher, (str, os.PathLike)):
        teacher = "<model in memory>"
    return json.loads(
        json.dumps({**asdict(replace(config, teacher=None)), "teacher": None if teacher is None else str(teacher)})
    )


def _resume_state(checkpoint: str | os.PathLike | None, config: TrainConfig) -> tuple[dict, dict]:
    """The trainer state saved in ``checkpoint``, after checking it was written with ``config``."""
    if checkpoint is None:
        raise ConfigError("resume needs the checkpoint folder the run wrote (checkpoint=..., --checkpoint DIR)")
    tensors, skeleton, meta = read_checkpoint(checkpoint)
    saved, ours = meta.get("train_config", {}), _jsonable(config)
    defaults = _jsonable(TrainConfig())  # keys a checkpoint from before they existed lacks
    # the device may change between runs (trained on a GPU, resumed on the CPU)
    differs = sorted(k for k in ours if k != "device" and saved.get(k, defaults[k]) != ours[k])
    if differs:
        raise ConfigError(
            f"{checkpoint}: the checkpoint was trained with other settings ({', '.join(differs)} differ); "
            "resume with the same ones"
        )
    return tensors, skeleton


def check_teacher(config: TrainConfig, model_config: ModelConfig, loss_fn: PairLoss) -> None:
    """A distillation loss needs a teacher, and a teacher is only used by one (refused before any work)."""
    if loss_fn.uses_teacher and config.teacher is None:
        raise ConfigError(
            f"loss {model_config.loss!r} learns from a teacher: give one (TrainConfig(teacher=...), "
            "--teacher PATH or --teacher mpnet)"
        )
    if config.teacher is not None and not loss_fn.uses_teacher:
        raise ConfigError(f"a teacher is used by loss 'distill' only, not by loss {model_config.loss!r}")


@torch.no_grad()
def validation_loss(
    modules,
    data: PairTensors,
    config: TrainConfig,
    batch_loss,
    world: World = World(),
    device: torch.device | None = None,
) -> float:
    """Mean per-batch loss on the validation data (fixed, unshuffled length-sorted batches);
    several workers each take every N-th batch and average the sums, so all get the same score
    (and so keep the same best epoch)."""
    modules.eval()
    order = np.argsort(data.lengths, kind="stable")
    rows = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    rows = [r for r in rows if len(r) >= 2][world.rank :: world.size]
    losses = [batch_loss(data, r).detach().float() for r in rows]  # read once, not a GPU stall per batch
    modules.train()
    total = float(torch.stack(losses).sum()) if losses else 0.0
    return mean_over_workers(total, len(losses), device or torch.device("cpu"))


@torch.no_grad()
def mix_weights(module: torch.nn.Module, other: dict[str, torch.Tensor], share: float) -> None:
    """module ← (1 − share) · module + share · other, tensor by tensor (integer buffers kept)."""
    for name, tensor in module.state_dict().items():
        if tensor.is_floating_point():
            tensor.lerp_(other[name].to(tensor.dtype), share)
