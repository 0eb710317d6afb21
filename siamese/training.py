"""The training loop: length-bucketed batches, one encoder call per batch, validation each epoch,
the best weights kept, and a threshold chosen on validation pairs at the end."""

from __future__ import annotations

import contextlib
import copy
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from tqdm.auto import tqdm

from .atomic import atomic_file
from .data import Pairs
from .errors import ConfigError, DataError
from .evaluation import choose_threshold
from .losses import TripletLoss
from .optim import LazyAdam
from .parallel import ParallelEncoder, single_threaded_ops
from .model import ModelConfig, SiameseModel
from .text import pad


PRECISIONS = ("auto", "bf16", "fp32")


@dataclass
class TrainConfig:
    """Optimisation hyper-parameters (the seed's values by default)."""

    epochs: int = 5
    batch_size: int = 256
    lr: float = 0.01
    margin: float = 0.25
    seed: int = 0
    bucket: bool = True  # group texts of similar length into batches: far less padding
    bucket_span: int = 50  # batches per sorted pool; larger = tighter lengths, less randomness
    precision: str = "auto"  # "bf16": LSTM matmuls in bfloat16 (fp32 weights); "fp32"; "auto": bf16 if the CPU has it
    threshold_metric: str = "accuracy"  # what the validation threshold maximises: accuracy | f1
    workers: int | None = None  # threads encoding length groups of a batch in parallel; None = one per core


def resolve_precision(precision: str) -> str:
    """"auto" → bf16 where the CPU computes it natively (AVX512-BF16 / AMX), else fp32."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    native = torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if precision == "bf16" and not native:
        raise ConfigError("precision 'bf16' needs a CPU with native bfloat16 (AVX512-BF16 or AMX); "
                          "this one has none: use 'fp32' or 'auto'")
    if precision == "auto":
        return "bf16" if native else "fp32"
    return precision


def seed_everything(seed: int) -> np.random.Generator:
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator, *, bucket: bool = True, span: int = 50) -> list[np.ndarray]:
    """Shuffled index batches; with ``bucket`` each pool of ``span`` batches is sorted by length
    before cutting, so a batch pads to a length close to its texts' own."""
    order = rng.permutation(len(lengths))
    if bucket:
        pool = batch_size * span
        order = np.concatenate(
            [chunk[np.argsort(lengths[chunk], kind="stable")] for chunk in np.split(order, range(pool, len(order), pool))]
        )
    out = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if len(out) > 1 and len(out[-1]) < 2:  # the in-batch triplet loss needs a negative
        out[-2:] = [np.concatenate(out[-2:])]
    rng.shuffle(out)
    return out


class PairTensors:
    """Token ids of both sides of a set of pairs, padded per batch on demand."""

    def __init__(self, model: SiameseModel, pairs: Pairs):
        self.ids1 = model.vectorizer.encode(pairs.text1)
        self.ids2 = model.vectorizer.encode(pairs.text2)
        self.lengths = np.maximum([len(s) for s in self.ids1], [len(s) for s in self.ids2])

    def __len__(self) -> int:
        return len(self.ids1)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Both sides stacked: rows 0..n-1 are side 1, rows n..2n-1 side 2 (one encoder call)."""
        ids, lengths = pad([self.ids1[i] for i in rows] + [self.ids2[i] for i in rows])
        return torch.from_numpy(ids), torch.from_numpy(lengths)


def train(
    train_pairs: Pairs,
    val_pairs: Pairs | None = None,
    *,
    model_config: ModelConfig | None = None,
    config: TrainConfig | None = None,
    checkpoint: str | os.PathLike | None = None,
    progress: bool = True,
) -> SiameseModel:
    """Train a Siamese model with the hard-negative triplet loss on the duplicate pairs of
    ``train_pairs``. ``val_pairs`` (both labels) give the validation loss (on their duplicates)
    and the decision threshold. Returns the model with the best validation weights; the
    summary is in ``model.info["training"]``."""
    config = config or TrainConfig()
    model_config = model_config or ModelConfig(seed=config.seed)
    precision = resolve_precision(config.precision)
    if config.threshold_metric not in ("accuracy", "f1"):
        raise ConfigError(f"threshold_metric must be 'accuracy' or 'f1', got {config.threshold_metric!r}")
    rng = seed_everything(config.seed)

    positives = train_pairs.positives()
    if len(positives) < 2:
        raise DataError(f"{train_pairs.source}: need at least 2 duplicate pairs (label 1) to train, found {len(positives)}")
    model = SiameseModel.build(positives.text1 + positives.text2, model_config)
    encoder = model.encoder
    train_data = PairTensors(model, positives)
    val_pos = val_pairs.positives() if val_pairs is not None else None
    val_data = PairTensors(model, val_pos) if val_pos is not None and len(val_pos) >= 2 else None

    loss_fn = TripletLoss(config.margin)
    sparse = [p for m in encoder.modules() if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()]
    dense = [p for p in encoder.parameters() if all(p is not s for s in sparse)]
    optimizers = [torch.optim.Adam(dense, lr=config.lr)]
    if sparse:  # lazy Adam: only the embedding rows seen in the batch are updated
        optimizers.append(LazyAdam(sparse, lr=config.lr))
    autocast = (
        (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    )

    runner = ParallelEncoder(encoder, config.workers, autocast)

    def batch_loss(data: PairTensors, rows: np.ndarray) -> torch.Tensor:
        v = runner(*data.batch(rows))
        return loss_fn(v[: len(rows)], v[len(rows) :])

    started = time.perf_counter()
    with single_threaded_ops(runner.workers > 1):
        history, best, train_seconds, trained_pairs = _fit(
            encoder, runner, optimizers, batch_loss, train_data, val_data, config, rng, checkpoint, progress)
    encoder.load_state_dict(best[1])
    encoder.eval()
    runner.close()
    threshold_info = {}
    if val_pairs is not None and len(set(val_pairs.labels.tolist())) == 2:
        sims = model.similarity(val_pairs.text1, val_pairs.text2)
        model.config.threshold, threshold_info = choose_threshold(sims, val_pairs.labels, metric=config.threshold_metric)
    elif progress:
        tqdm.write(f"no validation pairs with both labels: keeping threshold {model.config.threshold}")
    model.info["training"] = {
        "config": asdict(config),
        "precision": precision,
        "train_pairs": len(positives),
        "val_pairs": 0 if val_pairs is None else len(val_pairs),
        "best_epoch": best[2],
        "history": history,
        "seconds": round(time.perf_counter() - started, 3),
        "train_seconds": round(train_seconds, 3),
        "pairs_per_second": round(trained_pairs / train_seconds, 1) if train_seconds else None,
        "threshold": model.config.threshold,
        "threshold_choice": threshold_info,
        "sources": [train_pairs.source] + ([val_pairs.source] if val_pairs is not None else []),
    }
    return model


def _fit(encoder, runner, optimizers, batch_loss, train_data, val_data, config, rng, checkpoint, progress):
    """The epoch loop; returns (history, (best score, best weights, best epoch), seconds, pairs)."""
    history: list[dict] = []
    best = (float("inf"), None, -1)
    train_seconds, trained_pairs = 0.0, 0
    for epoch in range(1, config.epochs + 1):
        encoder.train()
        plan = batches(train_data.lengths, config.batch_size, rng, bucket=config.bucket, span=config.bucket_span)
        bar = tqdm(plan, desc=f"epoch {epoch}/{config.epochs}", unit="batch", disable=not progress, leave=False)
        t0, total = time.perf_counter(), 0.0
        for rows in bar:
            loss = batch_loss(train_data, rows)
            for opt in optimizers:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            runner.backward()  # the encoder's share of the gradient, group by group in parallel
            for opt in optimizers:
                opt.step()
            value = loss.item()
            total += value
            bar.set_postfix(loss=f"{value:.3f}")
        epoch_seconds = time.perf_counter() - t0
        epoch_pairs = sum(len(b) for b in plan)
        train_seconds += epoch_seconds
        trained_pairs += epoch_pairs
        record = {"epoch": epoch, "loss": total / max(len(plan), 1), "seconds": round(epoch_seconds, 3),
                  "pairs_per_second": round(epoch_pairs / epoch_seconds, 1)}
        if val_data is not None:
            record["val_loss"] = validation_loss(encoder, val_data, config, batch_loss)
        history.append(record)
        if progress:
            tqdm.write(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()))
        score = record.get("val_loss", record["loss"])
        if score < best[0]:
            best = (score, copy.deepcopy(encoder.state_dict()), epoch)
            if checkpoint:
                save_checkpoint(encoder, checkpoint)
    return history, best, train_seconds, trained_pairs


@torch.no_grad()
def validation_loss(encoder, data: PairTensors, config: TrainConfig, batch_loss) -> float:
    """Mean per-batch triplet loss on validation duplicates (fixed, unshuffled length-sorted batches)."""
    encoder.eval()
    order = np.argsort(data.lengths, kind="stable")
    rows = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    rows = [r for r in rows if len(r) >= 2]
    losses = [batch_loss(data, r).item() for r in rows]
    encoder.train()
    return float(np.mean(losses))


def save_checkpoint(encoder: torch.nn.Module, path: str | os.PathLike) -> None:
    """Write the encoder weights atomically (safetensors)."""
    path = Path(path)
    with atomic_file(path) as tmp:
        save_file({k: v.detach().contiguous() for k, v in encoder.state_dict().items()}, str(tmp))
