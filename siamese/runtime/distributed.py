"""Training on several processes (one machine or many) with PyTorch's own torch.distributed.

A run is N workers, started by ``torchrun`` (``torchrun --nnodes M --nproc-per-node N -m siamese
train ...``) or by ``siamese train --nproc N``, which calls PyTorch's elastic launcher (the
engine behind torchrun) on this machine. Each worker learns its place from the environment
torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), joins the process group (gloo on
CPUs, nccl on GPUs) and trains a DistributedDataParallel copy of the model.

Batches: every worker draws the same epoch plan from the same seed and takes its shard of each
global batch (rows r, r+N, ...), so the epoch count, the steps per epoch and the global batch
size are those of one process. The batch's vectors are gathered from all workers (with their
gradient) before the loss, so in-batch negatives and the loss are those of the whole global
batch, as in one process (see :func:`gather`).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError


@dataclass(frozen=True)
class World:
    """This process's place in the run (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def main(self) -> bool:
        """The worker that logs, validates last, chooses the threshold and writes the model."""
        return self.rank == 0

    def shard(self, rows: np.ndarray) -> np.ndarray:
        """This worker's rows of a global batch."""
        return rows[self.rank :: self.size]

    def shard_sizes(self, n: int) -> list[int]:
        """How many rows of an ``n``-row global batch each worker holds."""
        return [len(range(r, n, self.size)) for r in range(self.size)]


def world() -> World:
    """From torchrun's environment variables (absent: one process)."""
    try:
        size = int(os.environ.get("WORLD_SIZE", 1))
        rank = int(os.environ.get("RANK", 0))
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        local_size = int(os.environ.get("LOCAL_WORLD_SIZE", size))
    except ValueError as e:
        raise ConfigError(f"torchrun's environment is malformed ({e})") from None
    return World(rank, size, local_rank, local_size)


def threads_per_worker(world: World) -> int:
    """The cores of this machine shared among its workers (2 cores, 2 workers: 1 each)."""
    return max(1, len(os.sched_getaffinity(0)) // world.local_size)


@contextlib.contextmanager
def process_group(world: World, device: torch.device):
    """Join the run's process group for the duration (a no-op for one process)."""
    import torch.distributed as dist

    if not world.distributed or dist.is_initialized():
        yield
        return
    if device.type == "cuda":  # NCCL: one GPU per worker on each machine
        if world.local_size > torch.cuda.device_count():
            raise ConfigError(
                f"{world.local_size} workers on this machine but {torch.cuda.device_count()} CUDA GPU(s): "
                "NCCL runs one worker per GPU (--nproc at most the GPUs, or --device cpu)"
            )
        torch.cuda.set_device(device)  # NCCL's own buffers and streams on this worker's GPU
    before = torch.get_num_threads()
    torch.set_num_threads(threads_per_worker(world))  # N workers x all cores each would oversubscribe the CPU
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()
        torch.set_num_threads(before)


def gather(tensor: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """Every worker's rows of ``tensor`` (this worker holds ``sizes[rank]`` rows), stacked in rank
    order, with the gradient flowing back to each worker's own rows (torch.distributed.nn).

    Why gather: the in-batch losses (triplet, hinge, mnr) take their negatives from the batch, so
    without it N workers would each see 1/N of the negatives of one process with the same global
    batch, and the loss would change with N. Gathered, each worker computes the loss of the whole
    global batch; all_gather's backward sums every worker's gradient into each worker's rows and
    DDP averages the weights' gradients, which gives exactly the gradient of one process on the
    global batch. The cost is the vectors (batch x dim floats) sent each step and the loss
    computed N times (a batch x batch score matrix): small beside the encoder."""
    import warnings

    from torch.distributed.nn.functional import all_gather

    most = max(sizes)
    padded = (
        torch.cat([tensor, tensor.new_zeros((most - len(tensor), *tensor.shape[1:]))]) if len(tensor) < most else tensor
    )
    if tensor.requires_grad:
        with (
            warnings.catch_warnings()
        ):  # its successor (_functional_collectives) is private and needs reduce_scatter, which gloo lacks
            warnings.simplefilter("ignore", FutureWarning)
            parts = all_gather(padded)
    else:
        parts = _all_gather_plain(padded)
    return torch.cat([part[:n] for part, n in zip(parts, sizes)])


def _all_gather_plain(tensor: torch.Tensor) -> list[torch.Tensor]:
    import torch.distributed as dist

    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return parts


def mean_over_workers(total: float, count: int, device: torch.device) -> float:
    """``sum(total) / sum(count)`` over the workers (e.g. validation batches split among them)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return total / max(count, 1)
    both = torch.tensor([total, float(count)], dtype=torch.float64, device=device)
    dist.all_reduce(both)
    return float(both[0] / both[1].clamp(min=1))


def launch(nproc: int, fn: Callable, *args) -> dict:
    """Run ``fn(*args)`` on ``nproc`` local workers under PyTorch's elastic launcher (what
    torchrun --standalone does): a rendezvous on a free local port, RANK/WORLD_SIZE/... set for
    each worker, no restarts. Returns each rank's return value. A worker that fails raises
    torch's ChildFailedError (its exit code in ``failures``)."""
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc < 1:
        raise ConfigError(f"--nproc must be at least 1, got {nproc}")
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=f"siamese-{uuid.uuid4().hex[:8]}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=0.2,
        start_method="spawn",
    )
    return elastic_launch(config, fn)(*args)
