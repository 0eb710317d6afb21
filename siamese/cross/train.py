"""Training a cross-encoder: binary cross-entropy on labelled pairs (soft targets on graded ones:
the gold score scaled to [0, 1]), each pair in both orders so the model learns the symmetry it is
scored with, AdamW with linear warm-up and decay, length-bucketed batches, the epochs run by
:class:`siamese.training.loop.Trainer`; then the threshold and calibration on the validation pairs.
With a prior bi-encoder, its cosine's scale and shift are fitted first (on the validation pairs,
where its cosine means what it will mean at use; else the training pairs) and stay frozen."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.nn import functional as F

from ..config.configs import KIND_DEFAULTS, TrainConfig, jsonable_config
from ..data.pairs import Pairs
from ..decision.decide import both_labels, decide
from ..errors import ConfigError, DataError
from ..io.progress import tqdm
from ..runtime.devices import resolve_device, to_device
from ..runtime.precision import autocast, grad_scaler, resolve_precision
from ..training.batches import batches
from ..training.loop import Checkpoint, Trainer, read_checkpoint
from .model import CrossConfig, CrossEncoder

CROSS = KIND_DEFAULTS["cross-encoder"]


def targets_of(pairs: Pairs) -> np.ndarray:
    """0/1 labels, or graded scores scaled to [0, 1] by the data's own range (STS-B 0–5, SICK 1–5)."""
    if pairs.scores is None:
        return np.asarray(pairs.labels, dtype=np.float32)
    scores = np.asarray(pairs.scores, dtype=np.float32)
    low, high = float(scores.min()), float(scores.max())
    if high <= low:
        raise DataError(f"{pairs.source}: every graded score is {low}: nothing to learn from")
    return (scores - low) / (high - low)


def train_cross(
    train_pairs: Pairs,
    val_pairs: Pairs | None = None,
    *,
    model_config: CrossConfig | None = None,
    config: TrainConfig | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    run: dict | None = None,
    progress: bool = True,
    both_orders: bool = True,
) -> CrossEncoder:
    """Fine-tune a cross-encoder on ``train_pairs``; ``val_pairs`` (both labels) give the
    validation loss (best epoch kept), the threshold and the calibration. ``config`` is the one
    training configuration (:class:`~siamese.config.configs.TrainConfig`): an unset epochs, batch
    size or learning rate is the cross-encoder's (``KIND_DEFAULTS``), ``warmup_steps=0`` a warm-up
    over the first tenth of the steps. ``both_orders``: train on (a, b) and (b, a), the symmetry
    the model is scored with. ``checkpoint`` / ``resume`` / ``run`` as
    :func:`siamese.training.bi_encoder.train` (the one entry: ``ModelConfig(cross=True)``)."""
    config = cross_defaults(config or TrainConfig())
    targets = _training_targets(train_pairs)
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    rng = np.random.default_rng(config.seed)
    torch.manual_seed(config.seed)
    model = CrossEncoder.build(model_config).to(device)
    prior, val_prior = _fit_prior(model, train_pairs, val_pairs, targets)
    data = _Encoded.of(model, train_pairs, targets, prior, both_orders=both_orders)
    val = None
    if val_pairs is not None and len(val_pairs) >= 2:
        val = _Encoded.of(model, val_pairs, targets_of(val_pairs), val_prior, both_orders=False)
    cast = autocast(precision, device.type)
    trainer = _trainer(model, config, len(data.encodings), rng, checkpoint, run, progress, precision)
    if resume:
        _restore(trainer, checkpoint, config)
    started = time.perf_counter()
    fitted = trainer.fit(
        lambda rng: batches(data.lengths, config.batch_size, rng),
        lambda rows: data.loss(model, rows, cast),
        validate=(lambda: _validation_loss(model, val, cast)) if val is not None else None,
    )
    model.network.load_state_dict(fitted.best_weights)
    model.network.eval()
    decision = _decide(model, config, train_pairs, val_pairs, val_prior, progress)
    model.info["training"] = {
        "config": jsonable_config(config),
        "precision": precision,
        "device": str(device),
        "loss": "bce",
        "trains_on": "labelled",
        "given_pairs": len(train_pairs),
        "train_pairs": len(train_pairs),
        "val_pairs": 0 if val_pairs is None else len(val_pairs),
        "seconds": round(time.perf_counter() - started, 3),
        **fitted.record(),
        **decision.record(),
        "sources": [train_pairs.source] + ([val_pairs.source] if val_pairs is not None else []),
    }
    return model


def _training_targets(train_pairs: Pairs) -> np.ndarray:
    """The training targets, refusing too few pairs or a single label."""
    if len(train_pairs) < 2:
        raise DataError(
            f"{train_pairs.source}: need at least 2 pairs to train a cross-encoder, found {len(train_pairs)}"
        )
    targets = targets_of(train_pairs)
    if len(set(np.round(targets).tolist())) < 2 and train_pairs.scores is None:
        raise DataError(
            f"{train_pairs.source}: a cross-encoder trains on labelled pairs and needs both labels (0 and 1)"
        )
    return targets


def _fit_prior(model: CrossEncoder, train_pairs: Pairs, val_pairs: Pairs | None, targets: np.ndarray):
    """The prior bi-encoder's cosines of the training and validation pairs (None, None without a
    prior), its scale and shift fitted on the validation pairs when they hold both labels (where its
    cosine means what it will mean at use), else on the training pairs."""
    prior = model.prior_cosines(list(train_pairs.text1), list(train_pairs.text2))
    if prior is None:
        return None, None
    has_val = both_labels(val_pairs)  # one label: no fit there
    val_prior = model.prior_cosines(val_pairs.text1, val_pairs.text2) if has_val else None
    fit_prior(model.network, *((val_prior, targets_of(val_pairs)) if has_val else (prior, targets)))
    model.info["prior"] = {
        **model.info.get("prior", {}),
        "scale": float(model.network.prior_scale),
        "shift": float(model.network.prior_shift),
        "fitted_on": (val_pairs if has_val else train_pairs).source,
    }
    return prior, val_prior


@dataclass
class _Encoded:
    """Pairs tokenized together, their targets and prior cosines; ``both_orders`` adds (b, a)."""

    encodings: list
    lengths: np.ndarray
    targets: torch.Tensor
    cosines: torch.Tensor | None

    @classmethod
    def of(cls, model: CrossEncoder, pairs: Pairs, targets, prior, *, both_orders: bool) -> _Encoded:
        a, b = list(pairs.text1), list(pairs.text2)
        if both_orders:
            a, b, targets = a + list(pairs.text2), b + list(pairs.text1), np.concatenate([targets, targets])
            prior = None if prior is None else np.concatenate([prior, prior])
        encodings = model.tokenizer.encode(a, b)
        return cls(
            encodings,
            np.array([len(e.ids) for e in encodings]),
            to_device(torch.from_numpy(np.asarray(targets, dtype=np.float32)), model.device),
            None if prior is None else to_device(torch.from_numpy(prior), model.device),
        )

    def logits(self, model: CrossEncoder, rows, cast) -> torch.Tensor:
        with cast():
            logits = model.network(
                *model.device_batch([self.encodings[i] for i in rows]),
                None if self.cosines is None else self.cosines[rows],
            )
        return logits.float()

    def loss(self, model: CrossEncoder, rows, cast, reduction: str = "mean") -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(
            self.logits(model, rows, cast), self.targets[rows], reduction=reduction
        )


@torch.no_grad()
def _validation_loss(model: CrossEncoder, val: _Encoded, cast) -> float:
    """Mean binary cross-entropy over the validation pairs, 64 at a time."""
    model.network.eval()
    n = len(val.encodings)
    total = torch.zeros((), device=model.device)  # summed on the device, read once
    for s in range(0, n, 64):
        total += val.loss(model, np.arange(s, min(s + 64, n)), cast, reduction="sum")
    return float(total) / n


def _trainer(
    model: CrossEncoder, config: TrainConfig, rows: int, rng, checkpoint, run, progress, precision: str
) -> Trainer:
    """AdamW (no decay on biases and LayerNorm), linear warm-up then decay, checkpoints."""
    network = model.network
    decay = [p for n, p in network.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in network.named_parameters() if p.ndim <= 1]  # biases and LayerNorm
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": CROSS["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        fused=model.device.type == "cuda",  # one kernel for every weight's update
    )
    steps = config.epochs * -(-rows // config.batch_size)
    # warmup_steps=0: a tenth of the steps (BERT's fine-tuning recipe); never more than half
    warmup = min(config.warmup_steps, steps // 2) if config.warmup_steps else int(CROSS["warmup_share"] * steps)
    warmup = max(1, warmup)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / max(1, steps - warmup)))
    )
    meta = {"train_config": _config_json(config), "run": run or {}}
    return Trainer(
        network,
        [optimizer],
        epochs=config.epochs,
        rng=rng,
        schedulers=[scheduler],
        progress=progress,
        desc="cross epoch",
        item="pair",
        on_epoch_end=[Checkpoint(checkpoint, model.write, meta)] if checkpoint else [],
        scaler=grad_scaler(precision, model.device),
    )


def _config_json(config: TrainConfig) -> dict:
    # the device may change between runs (trained on a GPU, resumed on the CPU), and the log folder
    return {k: v for k, v in jsonable_config(config).items() if k not in ("device", "log_dir")}


def _restore(trainer: Trainer, checkpoint, config: TrainConfig) -> None:
    """The trainer state saved in ``checkpoint``, after checking it was written with ``config``."""
    if checkpoint is None:
        raise ConfigError("resume needs the checkpoint folder the run wrote")
    tensors, skeleton, meta = read_checkpoint(checkpoint)
    if meta.get("train_config") != _config_json(config):
        raise ConfigError(f"{checkpoint}: the checkpoint was trained with other settings; resume with the same ones")
    trainer.restore(tensors, skeleton)


def _decide(model: CrossEncoder, config: TrainConfig, train_pairs, val_pairs, val_prior, progress: bool):
    """The threshold and calibration (siamese.decision.decide), on the labels (graded pairs carry them
    too: STS-B >= 4 is a duplicate), as for a Siamese model; the validation pairs' prior cosines
    are reused."""

    def similarity(text1, text2):
        reuse = val_pairs is not None and text1 is val_pairs.text1
        return model.similarity_pairwise(text1, text2, prior=val_prior if reuse else None)

    decision = decide(
        similarity,
        val_pairs,
        train_pairs,
        default=model.threshold,
        metric=config.threshold_metric,
        calibrate=config.calibrate,
        seed=config.seed,
    )
    model.threshold, model.calibrator = decision.threshold, decision.calibrator
    if progress and "note" in decision.choice:
        tqdm.write(f"threshold {model.threshold:.3f}: {decision.choice['note']}")
    return decision


def fit_prior(network, cosines: np.ndarray, targets: np.ndarray) -> None:
    """The logistic fit of the targets on the prior's cosine (scale and shift, binary cross-entropy,
    L-BFGS), written into the network's frozen ``prior_scale`` / ``prior_shift``."""
    x, y = torch.from_numpy(np.asarray(cosines, np.float32)), torch.from_numpy(np.asarray(targets, np.float32))
    params = torch.zeros(2, dtype=torch.float32, requires_grad=True)
    optimizer = torch.optim.LBFGS([params], lr=1.0, max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(params[0] * x + params[1], y)
        loss.backward()
        return loss

    optimizer.step(closure)
    if not torch.isfinite(params).all():
        raise DataError("the prior's cosine could not be fitted to the labels (non-finite scale)")
    with torch.no_grad():
        network.prior_scale.fill_(float(params[0]))
        network.prior_shift.fill_(float(params[1]))


def cross_defaults(config: TrainConfig) -> TrainConfig:
    """``config`` with the cross-encoder's epochs, batch size and learning rate where they are unset,
    checked (the options it does not take are refused by :func:`siamese.training.bi_encoder.prepare`)."""
    config = replace(
        config,
        epochs=config.epochs or CROSS["epochs"],
        batch_size=config.batch_size or CROSS["batch_size"],
        lr=config.lr or CROSS["lr"],
    )
    config.check()
    return config
