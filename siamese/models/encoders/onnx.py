"""An exported encoder run by ONNX Runtime (``siamese export MODEL --format onnx``).

The folder's ``model.onnx`` computes what the PyTorch encoder's ``forward(ids, lengths)`` did
(tokens → transformer → pooling → unit vectors), so every command reads an exported folder as it
reads a PyTorch one. Inference only: nothing here has weights to train. ``onnxruntime`` is
imported only when such a folder is opened, so ``import siamese`` stays light.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from ...errors import ModelError
from ..pretrained import file_sha256
from .base import Encoder

FILE = "model.onnx"


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (SMT siblings share one core's
    matmul units: a second thread per core only contends)."""
    cpus = os.sched_getaffinity(0)
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(
                ((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip())
            )
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))


def session_options(threads: int | None = None):
    """ORT settings: every graph optimisation, one intra-op thread per physical core."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads or physical_cores()
    options.inter_op_num_threads = 1  # one graph at a time: the threads go to the matmuls
    options.log_severity_level = 3  # errors only: ORT's warnings about unused initialisers are noise here
    return options


def import_onnxruntime():
    from ...io.extras import require

    return require("onnx", "onnxruntime")


class OnnxEncoder(Encoder):
    """``forward(ids, lengths) -> (n, dim)`` through an ``onnxruntime.InferenceSession``."""

    width_option = None

    own_tokenizer = True  # the exported model's tokenizer.json
    exported = True  # no PyTorch weights: cannot be built from scratch or trained
    weights_file = FILE  # what SiameseModel.load expects beside config.json instead of model.safetensors
    length_groups = False  # ORT's own intra-op threads use every core
    encode_batch_size = 64

    def __init__(
        self,
        vocab_size: int | None = None,
        *,
        folder: str | os.PathLike | None = None,
        dim: int,
        sha256: str | None = None,
        quantize: str | None = None,
        source: dict | None = None,
        normalize: bool = True,
        threads: int | None = None,
    ):
        super().__init__()
        if folder is None:
            raise ModelError("an exported ONNX encoder is opened from its folder (SiameseModel.load), not built")
        self.path = Path(folder) / FILE
        self.dim, self.quantize, self.source, self.digest = int(dim), quantize, dict(source or {}), sha256
        self.normalize = normalize  # the graph ends with the L2 normalisation (exports are cosine-head models)
        if not self.path.is_file():
            raise ModelError(f"{folder}: model folder is missing {FILE}")
        # A damaged or swapped file would serve other vectors under this folder's fingerprint.
        if sha256 is not None and (actual := file_sha256(self.path)) != sha256:
            raise ModelError(
                f"{self.path}: sha256 {actual[:16]}… does not match config.json's {sha256[:16]}…; "
                "the file is damaged or was replaced: export the model again"
            )
        ort = import_onnxruntime()
        try:
            self.session = ort.InferenceSession(
                str(self.path), session_options(threads), providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own exception types for unreadable graphs
            raise ModelError(f"{self.path}: onnxruntime cannot open it ({str(e).splitlines()[0][:200]})") from None

    def saved_options(self) -> dict:
        return {"dim": self.dim, "sha256": self.digest, "quantize": self.quantize, "source": self.source}

    def save_to(self, folder: Path) -> None:
        """Copy the graph into a model folder being written (SiameseModel.save)."""
        shutil.copyfile(self.path, folder / FILE)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        out = self.session.run(
            None,
            {
                "input_ids": ids.numpy().astype("int64", copy=False),
                "lengths": lengths.numpy().astype("int64", copy=False),
            },
        )[0]
        return torch.from_numpy(out)

    def extra_repr(self) -> str:
        return f"{self.path.name}, dim={self.dim}, quantize={self.quantize}"
