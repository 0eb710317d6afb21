"""One training loop for every model here (the Siamese pairs model, the text→emoji model, the
emoji VAE): epochs of batches, a validation score per epoch, the best weights kept, one log line
per epoch, and checkpoints from which a killed run resumes exactly where it stopped.

The caller says what an epoch is (``plan``: the batches, drawn from the trainer's generator), what
a step is (``step``: a batch → its loss), and how to validate (``validate``: → a score, lower is
better). The trainer owns the order of things and the state that a resume must restore: weights,
optimizer and scheduler moments, the random generators, the history and the best weights so far.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ..errors import ConfigError, ModelError
from ..io.manifest import Field, check_fields, read_json_object
from ..io.progress import tqdm
from ..runtime.devices import synchronize

STATE_TENSORS = "trainer_state.safetensors"
STATE_JSON = "trainer_state.json"


@dataclass
class Fitted:
    """What :meth:`Trainer.fit` leaves: the per-epoch records and the best epoch's weights."""

    history: list[dict] = field(default_factory=list)
    best_score: float = float("inf")
    best_epoch: int = -1
    best_weights: dict[str, torch.Tensor] | None = None
    seconds: float = 0.0  # time spent in training steps (not validation), the warm-up included
    items: int = 0  # what the steps consumed (pairs, tweets, images)
    # The first step of this process, timed apart: CUDA context, cuDNN autotuning, kernel builds
    # and the memory pool's first allocations (~20 s on a GPU) are no measure of throughput.
    warmup_seconds: float | None = None
    warmup_items: int = 0

    @property
    def per_second(self) -> float | None:
        """Items per second after the warm-up step (with it, when nothing came after it)."""
        seconds, items = self.seconds - (self.warmup_seconds or 0.0), self.items - self.warmup_items
        if seconds <= 0 or items <= 0:
            seconds, items = self.seconds, self.items
        return round(items / seconds, 1) if seconds else None

    def record(self) -> dict:
        """The run's part of a model's ``info["training"]``: epochs, best epoch, speed."""
        return {
            "best_epoch": self.best_epoch,
            "history": self.history,
            "train_seconds": round(self.seconds, 3),
            "warmup_seconds": None if self.warmup_seconds is None else round(self.warmup_seconds, 3),
            "pairs_per_second": self.per_second,  # after the warm-up step
        }


class Trainer:
    """Runs ``epochs`` epochs over ``module`` (every trained weight: an ``nn.Module`` or ``ModuleList``)
    with ``optimizers`` and optional ``schedulers`` (stepped after each batch).

    ``on_epoch_end`` callbacks get the trainer after each epoch's record is in ``fitted.history``
    (e.g. :class:`Checkpoint`). ``after_backward`` runs between ``loss.backward()`` and the
    optimizer steps (the parallel encoder's share of the gradient). ``scaler``: fp16 autocast's
    ``torch.amp.GradScaler`` (see :func:`siamese.runtime.precision.grad_scaler`). The loss stays on the
    device, summed there and read once per epoch (and every ``log_every`` steps for the progress
    bar): reading it every step would stall the GPU's queue."""

    def __init__(
        self,
        module: torch.nn.Module,
        optimizers: Sequence[torch.optim.Optimizer],
        *,
        epochs: int,
        rng: np.random.Generator,
        schedulers: Sequence[Any] = (),
        progress: bool = True,
        desc: str = "epoch",
        item: str = "item",
        on_epoch_end: Iterable[Callable[[Trainer], None]] = (),
        after_backward: Callable[[], None] | None = None,
        scaler: Any = None,
        log_every: int = 50,
    ):
        self.module = module
        self.optimizers = list(optimizers)
        self.schedulers = list(schedulers)
        self.epochs = epochs
        self.rng = rng
        self.progress = progress
        self.desc, self.item = desc, item  # item: what a batch holds ("pair", "tweet"): names the record's counts
        self.on_epoch_end = list(on_epoch_end)
        self.after_backward = after_backward
        self.scaler = scaler
        self.log_every = log_every
        self.epoch = 0  # epochs completed
        self.fitted = Fitted()

    def fit(
        self,
        plan: Callable[[np.random.Generator], Sequence],
        step: Callable[[Any], torch.Tensor],
        *,
        validate: Callable[[], float | dict] | None = None,
        size: Callable[[Any], int] = len,
        monitor: str = "val_loss",
        maximize: bool = False,
    ) -> Fitted:
        """Train from the epoch after :attr:`epoch` to :attr:`epochs`. ``plan(rng)`` gives one
        epoch's batches, ``step(batch)`` a batch's loss, ``validate()`` the epoch's validation loss
        or a dict of validation metrics (added to the epoch's record), ``size(batch)`` how many
        items a batch holds. The best epoch is the one with the lowest (``maximize``: highest)
        ``monitor`` in its record; without ``validate``, the lowest training loss."""
        fitted = self.fitted
        if fitted.best_epoch == -1 and maximize:
            fitted.best_score = -float("inf")
        while self.epoch < self.epochs:
            epoch = self.epoch + 1
            self.module.train()
            batches = plan(self.rng)
            bar = tqdm(
                batches, desc=f"{self.desc} {epoch}/{self.epochs}", unit="batch", disable=not self.progress, leave=False
            )
            t0, summed, items = time.perf_counter(), None, 0
            for i, batch in enumerate(bar):
                loss = step(batch)
                self.update(loss)
                n = size(batch)
                # the epoch's loss is the mean per item, whatever the batch sizes
                weighted = loss.detach().float() * n
                summed = weighted if summed is None else summed + weighted
                items += n
                if fitted.warmup_seconds is None:
                    synchronize()
                    fitted.warmup_seconds, fitted.warmup_items = time.perf_counter() - t0, n
                if self.progress and i % self.log_every == 0:
                    bar.set_postfix(loss=f"{loss.item():.3f}")
            total = float(summed) if summed is not None else 0.0  # waits for the epoch's last step
            seconds = time.perf_counter() - t0
            fitted.seconds += seconds
            fitted.items += items
            record = {
                "epoch": epoch,
                "loss": total / max(items, 1),
                f"{self.item}s": items,
                "seconds": round(seconds, 3),
                f"{self.item}s_per_second": round(items / seconds, 1) if seconds else None,
            }
            if validate is not None:
                found = validate()
                record.update(found if isinstance(found, dict) else {"val_loss": found})
                self.module.train()
            fitted.history.append(record)
            self.epoch = epoch
            if self.progress:
                tqdm.write(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()))
            score = record[monitor] if validate is not None else record["loss"]
            for name in ("loss", "val_loss"):  # NaN/inf weights never recover: stop with a reason, not a crash later
                if name in record and not math.isfinite(record[name]):
                    raise ConfigError(
                        f"training diverged: the {'validation ' if name == 'val_loss' else ''}loss is "
                        f"{record[name]} at epoch {epoch} (try a lower learning rate, --lr)"
                    )
            if (score > fitted.best_score) if maximize else (score < fitted.best_score):
                fitted.best_score, fitted.best_epoch = score, epoch
                fitted.best_weights = copy.deepcopy(self.module.state_dict())
            for callback in self.on_epoch_end:
                callback(self)
        return fitted

    def update(self, loss: torch.Tensor) -> None:
        """Backward pass and one step of every optimizer and scheduler (scaled under fp16)."""
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        if self.after_backward is not None:
            self.after_backward()
        for opt in self.optimizers:
            if self.scaler is None:
                opt.step()
            else:
                self.scaler.step(opt)  # skipped when the scaled gradients overflowed
        if self.scaler is not None:
            self.scaler.update()
        for scheduler in self.schedulers:
            scheduler.step()

    # --- what a resume restores -------------------------------------------------------------

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, JSON) holding everything :meth:`restore` needs."""
        tensors: dict[str, torch.Tensor] = {}
        skeleton = {
            "epoch": self.epoch,
            "epochs": self.epochs,
            "weights": _flatten(self.module.state_dict(), "weights", tensors),
            "optimizers": [
                _flatten(opt.state_dict(), f"optimizer{i}", tensors) for i, opt in enumerate(self.optimizers)
            ],
            "schedulers": [_flatten(s.state_dict(), f"scheduler{i}", tensors) for i, s in enumerate(self.schedulers)],
            "numpy_rng": self.rng.bit_generator.state,
            "torch_rng": _flatten(torch.get_rng_state(), "torch_rng", tensors),
            "fitted": {
                "history": self.fitted.history,
                "best_score": self.fitted.best_score,
                "best_epoch": self.fitted.best_epoch,
                "seconds": self.fitted.seconds,
                "items": self.fitted.items,
                "best_weights": _flatten(self.fitted.best_weights, "best", tensors),
            },
        }
        return tensors, skeleton

    def restore(self, tensors: dict[str, torch.Tensor], skeleton: dict) -> None:
        """Continue from a :meth:`state` (same module, optimizers and schedulers, built the same way)."""
        if len(skeleton["optimizers"]) != len(self.optimizers) or len(skeleton["schedulers"]) != len(self.schedulers):
            raise ModelError(
                "the checkpoint was written by a different training set-up (optimizers or schedulers differ)"
            )
        try:  # read_checkpoint checked the structure; the shapes and values are checked here, by torch
            self.module.load_state_dict(_unflatten(skeleton["weights"], tensors))
            for opt, saved in zip(self.optimizers, skeleton["optimizers"]):
                opt.load_state_dict(_unflatten(saved, tensors))
            for scheduler, saved in zip(self.schedulers, skeleton["schedulers"]):
                scheduler.load_state_dict(_unflatten(saved, tensors))
            self.rng.bit_generator.state = skeleton["numpy_rng"]
            torch.set_rng_state(_unflatten(skeleton["torch_rng"], tensors))
        except (RuntimeError, ValueError, TypeError, KeyError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ModelError(f"the checkpoint does not fit this model and training set-up ({first[:200]})") from None
        f = skeleton["fitted"]
        self.fitted = Fitted(
            history=f["history"],
            best_score=f["best_score"],
            best_epoch=f["best_epoch"],
            best_weights=_unflatten(f["best_weights"], tensors),
            seconds=f["seconds"],
            items=f["items"],
        )
        self.epoch = skeleton["epoch"]


class Checkpoint:
    """An ``on_epoch_end`` callback: after every epoch, ``folder`` becomes (in one atomic
    replace) a whole model folder of the current weights, written by ``write_model(tmp)``, plus
    the trainer's state, so ``SiameseModel.load(folder)`` works and :func:`read_checkpoint`
    resumes. ``meta`` (JSON) is stored with it: e.g. the command line that started the run."""

    def __init__(self, folder: str | os.PathLike, write_model: Callable[[Path], None], meta: dict | None = None):
        self.folder = Path(folder)
        self.write_model = write_model
        self.meta = meta or {}

    def __call__(self, trainer: Trainer) -> None:
        from ..io.atomic import atomic_dir, naming

        tensors, skeleton = trainer.state()
        with atomic_dir(self.folder, kind="model") as tmp:
            self.write_model(tmp)
            with naming(tmp / STATE_TENSORS):
                save_file(tensors, str(tmp / STATE_TENSORS))
            with naming(tmp / STATE_JSON):
                (tmp / STATE_JSON).write_text(json.dumps({"meta": self.meta, "trainer": skeleton}) + "\n")


def read_checkpoint(folder: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict, dict]:
    """(tensors, trainer JSON, meta) of a checkpoint folder, every field checked as a model
    folder's are; a one-line error naming the file and field if it is not a sound checkpoint."""
    folder = Path(folder)
    if not (folder / STATE_JSON).is_file() or not (folder / STATE_TENSORS).is_file():
        raise ModelError(
            f"{folder}: not a training checkpoint (no {STATE_JSON}; train with --checkpoint DIR to write one)"
        )
    file = folder / STATE_JSON
    saved = read_json_object(file, ModelError)
    _check_required(saved, CHECKPOINT_FIELDS, file, "")
    _check_required(saved["trainer"], TRAINER_FIELDS, file, "trainer.")
    _check_required(saved["trainer"]["fitted"], FITTED_FIELDS, file, "trainer.fitted.")
    check_fields(saved, {"meta": Field(dict)}, file, ModelError)
    meta = saved.get("meta", {})
    check_fields(meta, META_FIELDS, file, ModelError, prefix="meta.")
    check_fields(meta.get("run") or {}, RUN_FIELDS, file, ModelError, prefix="meta.run.")
    check_fields((meta.get("run") or {}).get("cli") or {}, CLI_FIELDS, file, ModelError, prefix="meta.run.cli.")
    train_run = (meta.get("run") or {}).get("train")
    if train_run is not None:
        check_fields(train_run, TRAIN_RUN_FIELDS, file, ModelError, prefix="meta.run.train.")
    try:
        tensors = load_file(str(folder / STATE_TENSORS))
    except Exception as e:  # safetensors raises its own SafetensorError (and OSError) for a damaged file
        raise ModelError(
            f"{folder / STATE_TENSORS}: unreadable ({str(e).splitlines()[0] if str(e) else e!r})"
        ) from None
    trainer = saved["trainer"]
    for name in ("weights", "torch_rng", "optimizers", "schedulers"):
        node = {"list": trainer[name]} if name in ("optimizers", "schedulers") else trainer[name]
        _check_node(node, tensors, file, f"trainer.{name}")
    _check_node(trainer["fitted"]["best_weights"], tensors, file, "trainer.fitted.best_weights")
    try:
        np.random.Generator(np.random.PCG64()).bit_generator.state = trainer["numpy_rng"]
    except (ValueError, TypeError, KeyError):
        raise ModelError(f"{file}: field 'trainer.numpy_rng' is not a random generator's state") from None
    return tensors, trainer, meta


def _best_score(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


# What trainer_state.json holds (see Checkpoint and Trainer.state); each field required.
CHECKPOINT_FIELDS = {"trainer": Field(dict)}
TRAINER_FIELDS = {
    "epoch": Field(int, lo=0),
    "epochs": Field(int, lo=1),
    "weights": Field(dict),
    "optimizers": Field(list, item=dict),
    "schedulers": Field(list, item=dict),
    "numpy_rng": Field(dict),
    "torch_rng": Field(dict),
    "fitted": Field(dict),
}
FITTED_FIELDS = {
    "history": Field(list, item=dict),
    "best_score": _best_score,  # +inf before the first validation
    "best_epoch": Field(int, lo=-1),
    "seconds": Field(float, lo=0),
    "items": Field(int, lo=0),
    "best_weights": Field(dict),
}
META_FIELDS = {"train_config": Field(dict), "run": Field(dict)}
# "train": a training run's options (siamese.training.run); "cli": the command line's, as written before
RUN_FIELDS = {"cli": Field(dict, optional=True), "train": Field(dict, optional=True)}
TRAIN_RUN_FIELDS = {"run": Field(dict), "model_config": Field(dict), "config": Field(dict)}
CLI_FIELDS = {"data": Field(list, item=str)}
_NODE_KINDS = ("tensor", "dict", "list", "tuple", "value")


def _check_required(raw: dict, spec: dict, file: Path, prefix: str) -> None:
    """Every field of ``spec`` present in ``raw`` and of its kind (a Field, or a predicate)."""
    for name, kind in spec.items():
        if name not in raw:
            raise ModelError(f"{file}: field {prefix + name!r} is missing")
        if callable(kind) and not isinstance(kind, Field) and not kind(raw[name]):
            raise ModelError(f"{file}: field {prefix + name!r} has the wrong type ({type(raw[name]).__name__})")
    check_fields(raw, {k: v for k, v in spec.items() if isinstance(v, Field)}, file, ModelError, prefix=prefix)


def _check_node(root, tensors: dict, file: Path, where: str) -> None:
    """A flattened structure (see :func:`_flatten`): each node one of _NODE_KINDS, each tensor present."""
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or len(node) != 1 or next(iter(node)) not in _NODE_KINDS:
            raise ModelError(f"{file}: field {where!r} is not a saved training state")
        kind, value = next(iter(node.items()))
        if kind == "tensor" and (not isinstance(value, str) or value not in tensors):
            raise ModelError(f"{file}: field {where!r} names tensor {str(value)[:40]!r}, absent from {STATE_TENSORS}")
        if kind == "value" and not (value is None or isinstance(value, (bool, int, float, str))):
            raise ModelError(f"{file}: field {where!r} is not a saved training state")
        if kind in ("list", "tuple"):
            if not isinstance(value, list):
                raise ModelError(f"{file}: field {where!r} is not a saved training state")
            stack.extend(value)
        if kind == "dict":
            if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
                raise ModelError(f"{file}: field {where!r} is not a saved training state")
            stack.extend(p[1] for p in value)


def _flatten(obj, prefix: str, tensors: dict[str, torch.Tensor]):
    """A nested structure with tensors → JSON with each tensor replaced by {"tensor": key}."""
    if torch.is_tensor(obj):
        tensors[prefix] = obj.detach().contiguous().clone()
        return {"tensor": prefix}
    if isinstance(obj, dict):
        # JSON keys are strings: remember integer keys (optimizer state is keyed by parameter index)
        return {"dict": [[k, _flatten(v, f"{prefix}.{k}", tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {
            "tuple" if isinstance(obj, tuple) else "list": [
                _flatten(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)
            ]
        }
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    raise TypeError(f"cannot checkpoint a {type(obj).__name__} at {prefix}")


def _unflatten(node, tensors: dict[str, torch.Tensor]):
    if "tensor" in node:
        return tensors[node["tensor"]]
    if "dict" in node:
        return {k: _unflatten(v, tensors) for k, v in node["dict"]}
    if "list" in node:
        return [_unflatten(v, tensors) for v in node["list"]]
    if "tuple" in node:
        return tuple(_unflatten(v, tensors) for v in node["tuple"])
    return node["value"]
