"""Training the Siamese model: length-bucketed batches, one encoder call per batch, the epochs run
by :class:`siamese.training.loop.Trainer` (validation, best weights, checkpoints, resume), and a
threshold and calibration chosen on validation pairs at the end (siamese.decision.decide).

:func:`train` is the one entry for every kind of model: ``ModelConfig(cross=True)`` trains a
cross-encoder (siamese.cross.train) from the same configurations."""

from __future__ import annotations

import contextlib
import copy
import gc
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..config.configs import KIND_DEFAULTS, LossConfig, ModelConfig, TrainConfig, jsonable_config
from ..data.pairs import Pairs, PairsLike, as_pairs
from ..data.vocabulary import pad
from ..decision.decide import both_labels, check_target_pairs, decide
from ..decision.threshold import check_targets
from ..errors import ConfigError, DataError, ModelError
from ..io.progress import tqdm
from ..models.encoders import default_lr, encoder_class
from ..models.losses import PairLoss, build_loss
from ..models.siamese import SiameseModel, check_trainable
from ..runtime import kernels
from ..runtime.devices import is_cpu, resolve_device, to_device
from ..runtime.distributed import World, gather, mean_over_workers, process_group
from ..runtime.distributed import world as current_world
from ..runtime.parallel import ParallelEncoder, single_threaded_ops
from ..runtime.precision import autocast as precision_autocast
from ..runtime.precision import grad_scaler, resolve_precision
from .batches import batches, seed_everything, weighted_rows
from .board import TensorBoardLog, check_log_dir
from .loop import Checkpoint, Trainer, read_checkpoint
from .optim import LazyAdam
from .teacher import TeacherVectors, load_teacher

if TYPE_CHECKING:
    from ..cross.model import CrossEncoder

__all__ = ["LossConfig", "ModelConfig", "Recipe", "TrainConfig", "batches", "prepare", "train"]


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
    if not both_labels(data):
        raise DataError(f"{data.source}: this loss trains on labelled pairs and needs both labels (0 and 1)")
    return data


@dataclass(frozen=True)
class Recipe:
    """A training's configurations, checked once (:func:`prepare`), and the loss they build."""

    model_config: ModelConfig
    config: TrainConfig
    loss_fn: PairLoss | None  # None: a cross-encoder, whose loss is its own


def prepare(
    model_config: ModelConfig | None = None, config: TrainConfig | None = None, *, initial: SiameseModel | None = None
) -> Recipe:
    """Check a training's configurations before any data is read or model is built, fill in the
    model kind's defaults (epochs, batch size) and build the loss: once per training."""
    config = config or TrainConfig()
    if initial is not None:
        model_config = replace(initial.config, loss=model_config.loss if model_config else initial.config.loss)
    model_config = model_config or ModelConfig()
    config.check()
    check_targets(config.target_precision, config.target_recall)
    check_log_dir(config.log_dir)
    if model_config.cross:
        model_config.check()
        if config.log_dir is not None or config.target_precision is not None or config.target_recall is not None:
            raise ConfigError(
                "a cross-encoder's training takes no log folder (--log-dir) or target precision/recall yet"
            )
        return Recipe(model_config, config, None)
    if model_config.seed not in (0, config.seed):  # 0: ModelConfig's default, i.e. not chosen there
        raise ConfigError(
            f"two seeds: ModelConfig.seed={model_config.seed}, TrainConfig.seed={config.seed}; "
            "set TrainConfig.seed only (it seeds the weights too)"
        )
    model_config = replace(model_config, seed=config.seed)
    model_config.check()
    check_trainable(model_config)  # before a teacher encodes anything
    if config.keep_initial and not encoder_class(model_config.encoder).pretrained:
        raise ConfigError(
            f"keep_initial mixes pretrained weights back in: encoder {model_config.encoder!r} starts from "
            "random weights (use it with --encoder transformer)"
        )
    loss_fn = build_loss(model_config.loss, config.loss_options)
    check_teacher(config, model_config, loss_fn)
    kind = KIND_DEFAULTS["bi-encoder"]
    config = replace(config, epochs=config.epochs or kind["epochs"], batch_size=config.batch_size or kind["batch_size"])
    return Recipe(model_config, config, loss_fn)


def train(
    train_pairs: PairsLike,
    val_pairs: PairsLike | None = None,
    *,
    model_config: ModelConfig | None = None,
    config: TrainConfig | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    run: dict | None = None,
    progress: bool = True,
    initial: SiameseModel | None = None,
    recipe: Recipe | None = None,
) -> SiameseModel | CrossEncoder:
    """Train a model; ``model_config.cross`` chooses a cross-encoder (:mod:`siamese.cross`) over
    a Siamese bi-encoder. The loss (``model_config.loss``) says what a bi-encoder learns from: the
    duplicate pairs of ``train_pairs`` (triplet, hinge, mnr; the rest of the batch gives the
    negatives), all its labelled pairs (bce, contrastive), or (anchor, positive, negative)
    triplets (:class:`siamese.data.answers.Triplets`). ``val_pairs`` (both labels) give the
    validation loss, the decision threshold and the calibration (:func:`siamese.decision.decide.decide`).
    Returns the model with the best validation weights; the summary is in ``model.info["training"]``.

    ``recipe``: the configurations already checked by :func:`prepare` (then ``model_config``,
    ``config`` and ``initial`` are not read again).

    ``initial``: start from this model (its vocabulary, architecture and weights; a copy is
    trained), e.g. a distilled static student; ``model_config`` may then only change the loss.

    ``checkpoint``: a folder rewritten (atomically) after every epoch: a model folder of that
    epoch's weights plus the optimizer, scheduler and random-generator state and ``run`` (JSON the
    caller wants back on resume, e.g. its command line). ``resume``: continue the run saved there,
    called with the same data and configuration; it ends after the same number of epochs, as if
    it had never stopped.

    Under torchrun (or ``siamese train --nproc N``) each worker calls this with the same arguments:
    the workers train one DDP model on shards of each batch (see :mod:`siamese.runtime.distributed`);
    rank 0 alone logs, writes the checkpoint and chooses the threshold and calibration, so save
    rank 0's model (the others return the same weights without them)."""
    recipe = recipe or prepare(model_config, config, initial=initial)
    train_pairs = as_pairs(train_pairs, "train_pairs")
    val_pairs = None if val_pairs is None else as_pairs(val_pairs, "val_pairs")
    if recipe.model_config.cross:
        from ..cross.model import CrossConfig
        from ..cross.train import train_cross

        return train_cross(
            train_pairs,
            val_pairs,
            model_config=CrossConfig.of(recipe.model_config),
            config=recipe.config,
            checkpoint=checkpoint,
            resume=resume,
            run=run,
            progress=progress,
        )
    world = current_world()
    with process_group(world, resolve_device(recipe.config.device)):
        return _train(
            recipe,
            train_pairs,
            val_pairs,
            checkpoint=checkpoint,
            resume=resume,
            run=run,
            progress=progress and world.main,
            initial=initial,
            world=world,
        )


def _train(recipe: Recipe, train_pairs: Pairs, val_pairs: Pairs | None, *, initial, world: World, **how):
    """A checked recipe trained: the data the loss uses, the model, the epochs, the decision."""
    config = recipe.config
    resume_state = _resume_state(how["checkpoint"], config) if how["resume"] else None
    device = resolve_device(config.device)
    if world.distributed and config.batch_size < 2 * world.size:
        raise ConfigError(
            f"batch size {config.batch_size} for {world.size} workers: give each at least 2 rows "
            f"(--batch-size {2 * world.size} or more)"
        )
    check_target_pairs(config.target_precision, config.target_recall, val_pairs)  # before the epochs
    rng = seed_everything(config.seed)
    data, val_set = _training_sets(recipe, train_pairs, val_pairs)
    teacher, teacher_info = _teacher_vectors(recipe, data, val_set, how["progress"], device)
    model = _build_model(recipe.model_config, train_pairs, initial, device)
    graded = recipe.loss_fn.uses_scores
    train_data = PairTensors(model, data, graded, teacher)
    val_data = PairTensors(model, val_set, graded, teacher) if val_set is not None and len(val_set) >= 2 else None
    started = time.perf_counter()
    fitted, lr = _fit(
        model, recipe, train_data, val_data, rng, world=world, device=device, resume_state=resume_state, **how
    )
    if not world.main:  # the threshold, calibration and summary are rank 0's
        model.info["training"] = {
            "rank": world.rank,
            "workers": world.size,
            "best_epoch": fitted.best_epoch,
            "history": fitted.history,
        }
        return model
    decision = _decide(model, recipe, train_pairs, val_pairs, how["progress"])
    model.info["training"] = {
        "config": {
            **asdict(replace(config, teacher=None)),
            "teacher": teacher_info and teacher_info["source"],
            "lr": lr,
            "margin": recipe.loss_fn.margin,
            "scale": recipe.loss_fn.scale,
        },
        "precision": _precision(recipe, device),
        "device": str(device),
        "workers": world.size,
        "loss": recipe.model_config.loss,
        **({"teacher": teacher_info} if teacher_info else {}),
        "trains_on": "triplets" if data.triplets else recipe.loss_fn.trains_on,
        "given_pairs": len(train_pairs),
        "train_pairs": len(data),
        "val_pairs": 0 if val_pairs is None else len(val_pairs),
        "seconds": round(time.perf_counter() - started, 3),
        **fitted.record(),
        **decision.record(),
        "sources": [train_pairs.source] + ([val_pairs.source] if val_pairs is not None else []),
    }
    return model


def _training_sets(recipe: Recipe, train_pairs: Pairs, val_pairs: Pairs | None):
    """What the loss trains and validates on (see :func:`training_data`), at least 2 rows of it."""
    loss_fn = recipe.loss_fn
    data = training_data(train_pairs, loss_fn)
    if len(data) < 2:
        what = {"positives": "duplicate pairs (label 1)", "labelled": "labelled pairs"}.get(loss_fn.trains_on, "pairs")
        raise DataError(
            f"{train_pairs.source}: need at least 2 {what} to train with loss "
            f"{recipe.model_config.loss!r}, found {len(data)}"
        )
    val_set = training_data(val_pairs, loss_fn) if val_pairs is not None and len(val_pairs) else None
    return data, val_set


def _teacher_vectors(recipe: Recipe, data, val_set, progress: bool, device: torch.device):
    """A distillation loss's teacher vectors of every distinct training and validation text,
    encoded once before the student is built (None, None for the other losses)."""
    if not recipe.loss_fn.uses_teacher:
        return None, None
    teacher_model, teacher_info = load_teacher(
        recipe.config.teacher, max_length=recipe.model_config.max_length, device=device
    )
    texts = [t for d in (data, val_set) if d is not None for side in d.sides() for t in side]
    teacher = TeacherVectors.encode(teacher_model, texts, progress=progress)
    del teacher_model  # hundreds of MB for a large teacher; only its vectors are needed now
    teacher_info.update(texts=len(teacher.index), seconds=round(teacher.seconds, 3))
    return teacher, teacher_info


def _build_model(model_config: ModelConfig, train_pairs: Pairs, initial: SiameseModel | None, device) -> SiameseModel:
    """A copy of ``initial``, or a new model. The vocabulary comes from every training text, not
    only those the loss trains on: a word seen only in non-duplicates still keeps its own
    (untrained) vector, so texts sharing it still look alike, which is much of the signal on
    long, rare-word texts (MSRP, forums)."""
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
    return model.to(device)


def _precision(recipe: Recipe, device: torch.device) -> str:
    """The precision training computes in: mixed precision on a GPU only where it pays, a pretrained
    transformer's large matmuls (cuDNN's LSTM is fast in fp32)."""
    pretrained = encoder_class(recipe.model_config.encoder).pretrained
    return resolve_precision(recipe.config.precision, device, mixed_on_gpu=pretrained)


def _optimizers(encoder: torch.nn.Module, head: torch.nn.Module, lr: float, warmup_steps: int):
    """Adam on the dense weights (fused: one kernel, ~3x faster steps), lazy Adam on the sparse
    embeddings (only the rows a batch saw), and the linear warm-up's schedulers: early steps of a
    pretrained encoder otherwise take full-size Adam steps on noisy moments."""
    trainable = [p for p in [*encoder.parameters(), *head.parameters()] if p.requires_grad]
    sparse = [
        p
        for m in encoder.modules()
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse
        for p in m.parameters()
    ]
    dense = [p for p in trainable if all(p is not s for s in sparse)]
    optimizers = [torch.optim.Adam(dense, lr=lr, fused=True)] if dense else []
    if sparse:
        optimizers.append(LazyAdam(sparse, lr=lr))
    schedulers = [
        torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / (warmup_steps + 1)))
        for opt in optimizers
        if warmup_steps
    ]
    return optimizers, schedulers


class _Steps:
    """The loss of a batch of rows: a training step (``sharded``: with several workers, this
    worker encodes its shard of the rows; see siamese.runtime.distributed) or a validation batch."""

    def __init__(self, step_loss: BatchLoss, world: World, device: torch.device, gather: bool):
        self.step_loss, self.world, self.device, self.gather = step_loss, world, device, gather
        self.net = step_loss
        if world.distributed:
            from torch.nn.parallel import DistributedDataParallel

            # find_unused_parameters: a pretrained transformer's pooler gets no gradient with mean pooling
            self.net = DistributedDataParallel(
                step_loss,
                device_ids=[device.index] if device.type == "cuda" else None,
                find_unused_parameters=step_loss.encoder.pretrained,
            )

    def __call__(self, data: PairTensors, rows: np.ndarray, sharded: bool = False) -> torch.Tensor:
        sizes = None
        if sharded:
            sizes = self.world.shard_sizes(len(rows)) if self.gather else None
            rows = self.world.shard(rows)
        ids, lengths = data.batch(rows)
        device = self.device
        labels = to_device(data.labels[rows], device) if data.labels is not None else None
        teacher = tuple(to_device(t, device) for t in data.teacher_batch(rows)) if data.teacher is not None else None
        net = self.net if sharded else self.step_loss
        return net(to_device(ids, device), to_device(lengths, device), len(rows), labels, teacher, sizes)


def _fit(model: SiameseModel, recipe: Recipe, train_data, val_data, rng, *, world, device, resume_state, **how):
    """The epochs: optimizers, the parallel encoder, checkpoints and logs, the best weights kept
    (and WiSE-FT's mix with the starting weights). Returns the trainer's record and the learning rate."""
    config, encoder, head = recipe.config, model.encoder, model.head
    start_weights = {k: v.detach().clone() for k, v in encoder.state_dict().items()} if config.keep_initial else None
    lr = config.lr if config.lr is not None else default_lr(recipe.model_config.encoder)
    optimizers, schedulers = _optimizers(encoder, head, lr, config.warmup_steps)
    precision = _precision(recipe, device)
    # Length groups on threads are the CPU's way to use every core in one process; workers (each
    # with cores / N torch threads) replace them in a distributed run, and a GPU takes batches whole.
    runner = ParallelEncoder(
        encoder,
        1 if world.distributed or not is_cpu(device) else config.workers,
        precision_autocast(precision, device.type),
    )
    steps = _Steps(BatchLoss(encoder, head, runner, recipe.loss_fn), world, device, config.gather)
    modules = torch.nn.ModuleList([encoder, head])
    callbacks = []
    if how["checkpoint"] and world.main:
        meta = {"train_config": jsonable_config(config), "run": how["run"] or {}}
        callbacks.append(Checkpoint(how["checkpoint"], model.write, meta))
    board = TensorBoardLog(config.log_dir) if config.log_dir is not None and world.main else None
    trainer = Trainer(
        modules,
        optimizers,
        epochs=config.epochs,
        rng=rng,
        schedulers=schedulers,
        progress=how["progress"],
        item="pair",
        on_epoch_end=callbacks + ([board] if board else []),
        after_backward=runner.backward,
        scaler=grad_scaler(precision, device),
    )
    if resume_state is not None:
        try:
            trainer.restore(*resume_state)
        except (RuntimeError, KeyError, ValueError) as e:  # other weights' shapes, another vocabulary
            raise ModelError(
                f"{how['checkpoint']}: the checkpoint does not fit this model and data ({str(e).splitlines()[0]})"
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

    def step(rows):
        return steps(train_data, rows, sharded=world.distributed)

    validate = None
    if val_data is not None:
        validate = lambda: validation_loss(modules, val_data, config, steps, world, device)  # noqa: E731
    if precision == "bf16" and is_cpu(device):
        kernels.load()  # a first build (~30 s, once per install) must not count as training time
    try:
        with single_threaded_ops(runner.workers > 1), gc_frozen():
            fitted = trainer.fit(plan, board.logged(step) if board else step, validate=validate)
    finally:
        if board:
            board.close()
    modules.load_state_dict(fitted.best_weights)
    if start_weights is not None:
        mix_weights(encoder, start_weights, config.keep_initial)
    modules.eval()
    runner.close()
    return fitted, lr


def _decide(model: SiameseModel, recipe: Recipe, train_pairs: Pairs, val_pairs: Pairs | None, progress: bool):
    """The threshold and calibration (siamese.decision.decide), set on the model and said when they fall back."""
    config = recipe.config
    decision = decide(
        model.similarity_pairwise,
        val_pairs,
        train_pairs,
        default=model.threshold,
        metric=config.threshold_metric,
        target_precision=config.target_precision,
        target_recall=config.target_recall,
        calibrate=config.calibrate,
        seed=config.seed,
    )
    decision.threshold = model.set_threshold(decision.threshold)  # clipped to the head's range
    model.calibrator = decision.calibrator
    if progress and "note" in decision.choice:
        tqdm.write(f"threshold {model.threshold:.3f}: {decision.choice['note']}")
    if progress and config.calibrate and not decision.calibration["fitted"]:
        tqdm.write(f"not calibrated ({decision.calibration['note']})")
    return decision


def _resume_state(checkpoint: str | os.PathLike | None, config: TrainConfig) -> tuple[dict, dict]:
    """The trainer state saved in ``checkpoint``, after checking it was written with ``config``."""
    if checkpoint is None:
        raise ConfigError("resume needs the checkpoint folder the run wrote (checkpoint=..., --checkpoint DIR)")
    tensors, skeleton, meta = read_checkpoint(checkpoint)
    saved, ours = meta.get("train_config", {}), jsonable_config(config)
    defaults = jsonable_config(TrainConfig())  # keys a checkpoint from before they existed lacks
    # the device may change between runs (trained on a GPU, resumed on the CPU), and the log folder
    differs = sorted(k for k in ours if k not in ("device", "log_dir") and saved.get(k, defaults[k]) != ours[k])
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
    world: World | None = None,
    device: torch.device | None = None,
) -> float:
    """Mean per-batch loss on the validation data (fixed, unshuffled length-sorted batches);
    several workers each take every N-th batch and average the sums, so all get the same score
    (and so keep the same best epoch)."""
    world = world or World()
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
