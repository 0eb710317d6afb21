"""``siamese export``: a model folder whose encoder runs in ONNX Runtime.

The folder holds ``config.json`` (encoder ``onnx``; the threshold, text settings and calibration of
the model it came from), ``tokenizer.json`` and ``model.onnx`` — no pickles, no PyTorch weights — and
:meth:`SiameseModel.load` opens it like any other, so every command works on it unchanged.

How the graph is made, and why:

- ``torch.onnx.export(dynamo=False)`` (the TorchScript exporter): ONNX Runtime ran its graph of
  all-MiniLM-L6-v2 ~20 % faster than the dynamo exporter's (one core, CPU time; int8 alike).
  ONNX Runtime's own graph optimisations (all levels) run when the session opens; its offline
  BERT optimizer (fused Attention / SkipLayerNorm) made the graph ~15 % slower on CPU, so it is not used.
- Dynamic batch and sequence axes; inputs ``input_ids`` and ``lengths`` (int64) as the PyTorch
  encoder takes them, output the unit vectors: pooling and normalisation are inside the graph.
- ``--quantize int8``: dynamic quantisation (int8 weights per output channel, activations
  quantised per batch at run time): VNNI/AVX2 integer matmuls, smaller file. The matmuls whose
  inputs have the largest outliers stay fp32 where quantising them would cost accuracy (see
  :func:`quantize_int8`: none for MiniLM, 9 of 72 for mpnet on a VNNI CPU). Weights use 7 bits
  of the 8 (ONNX Runtime's ``reduce_range``) so the folder is right on every CPU: without VNNI,
  ONNX Runtime's int8 kernels add products in pairs into 16 bits, which full 8-bit weights can
  overflow (measured on an AVX2-only CPU: all-mpnet-base-v2 needed 36 of 72 matmuls in fp32 at
  8 bits, 18 at 7; MiniLM's worst text 0.953 → 0.965 cosine to fp32, the same speed).

The exported folder has its own fingerprint (its vectors differ slightly from the PyTorch
model's, more so in int8): an index built with the PyTorch model is refused with it, and the
message says to rebuild the index with the exported model.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ..data.vocabulary import pad
from ..errors import ConfigError, ModelError
from ..io.atomic import atomic_dir, check_not_input, check_target
from ..io.report import RunReport
from .encoders.onnx import FILE, file_sha256
from .siamese import SiameseModel

EXPORT_FORMATS = ("onnx",)
QUANTIZATIONS = ("int8",)
OPSET = 17
# Real-looking texts of different lengths and topics: int8 picks the matmuls it keeps in fp32 on
# them, and the finished export is checked on them against the PyTorch model before it appears.
CHECK_TEXTS = (
    "When will I see you?",
    "When can I see you again?",
    "Do they enjoy eating the dessert?",
    "How do I learn Python quickly if I already know some C?",
    "What is the best way to lose weight fast?",
    "Why is the sky blue?",
    "A man is playing a guitar on stage.",
    "Two dogs are running through a snowy field.",
    "The stock market fell sharply on Tuesday after the central bank raised interest rates again.",
    "Is it safe to take ibuprofen with coffee in the morning?",
    "How can I cancel my car insurance policy online?",
    "Which programming language should a beginner learn first, and why do people recommend it?",
    "The committee approved the new budget, although several members raised concerns about its long-term costs.",
    "What are the symptoms of vitamin D deficiency?",
    "Can you recommend a good book about the history of Rome?",
    "Obama signs the bill into law.",
)
MIN_COSINE = {None: 0.999, "int8": 0.95}  # the worst check text's cosine to the PyTorch model's vector
MIN_MEAN_COSINE_INT8 = 0.99  # int8 keeps matmuls in fp32 until the check texts' mean cosine reaches this


def check_export_options(format: str, quantize: str | None) -> None:
    """Refuse an unknown format or quantisation with one line (before anything is loaded)."""
    if format not in EXPORT_FORMATS:
        raise ConfigError(f"unknown export format {format!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ConfigError(
            f"unknown quantization {quantize!r}; choose one of: {', '.join(QUANTIZATIONS)} (or leave it out for fp32)"
        )


def check_exportable(model: SiameseModel) -> None:
    where = model.path or "this model"
    if getattr(model.encoder, "exported", False):
        raise ModelError(f"{where}: already an exported model; export the PyTorch model it came from")
    if model.config.encoder != "transformer":
        raise ConfigError(
            f"{where}: export supports the transformer encoder; a {model.config.encoder!r} model is "
            "small and already fast in PyTorch"
        )
    if model.config.head != "cosine":
        raise ConfigError(
            f"{where}: export writes cosine-head models (the graph ends with the unit vectors); "
            f"this one has head {model.config.head!r}"
        )


def export_model(
    model: SiameseModel,
    out: str | os.PathLike,
    *,
    format: str = "onnx",
    quantize: str | None = None,
    overwrite: bool = False,
) -> dict:
    """Write ``out`` (atomically: complete or not at all; an existing folder only if it is a
    siamese folder, or with ``overwrite``) and return what was done."""
    check_export_options(format, quantize)
    check_exportable(model)
    from ..io.extras import require

    require("onnx", "onnx")
    onnxruntime = require("onnx", "onnxruntime")
    out = Path(out)
    with atomic_dir(out, overwrite=overwrite, kind="model") as tmp:
        raw = tmp / "export.onnx"
        export_graph(model.encoder, raw)
        quantization = None
        if quantize == "int8":
            ids, lengths = pad(model.vectorizer.encode(list(CHECK_TEXTS)), model.vectorizer.pad_id)
            quantization = quantize_int8(raw, tmp / FILE, ids, lengths)
            raw.unlink()
        else:
            raw.replace(tmp / FILE)
        source = {
            "encoder": model.config.encoder,
            "pooling": model.encoder.pooling,
            "fingerprint": model.fingerprint(),
            "path": str(model.path) if model.path else None,
            "model_type": model.encoder.hf_config.get("model_type"),
        }
        options = {"dim": model.dim, "sha256": file_sha256(tmp / FILE), "quantize": quantize, "source": source}
        config = replace(model.config, encoder="onnx", dim=None, encoder_options=options)
        info = {
            **model.info,
            "export": {
                "format": format,
                "quantize": quantize,
                "opset": OPSET,
                "int8": quantization,
                "torch": torch.__version__,
                "onnxruntime": onnxruntime.__version__,
            },
        }
        # The calibration comes along: it maps similarities to probabilities, and the exported
        # vectors are the model's to within the cosine checked below.
        (tmp / "config.json").write_text(model._config_json(config, info))
        model.vectorizer.save(tmp / "tokenizer.json")
        # The folder must give the model's vectors before it replaces anything.
        exported = SiameseModel.load(tmp)
        reference = model.encode(list(CHECK_TEXTS), precision="fp32")
        cosine = float((exported.encode(list(CHECK_TEXTS), batch_size=len(CHECK_TEXTS)) * reference).sum(1).min())
        if not cosine >= MIN_COSINE[quantize]:
            raise ModelError(
                f"the exported graph's vectors are off (cosine {cosine:.4f} to the PyTorch model's, "
                f"expected >= {MIN_COSINE[quantize]}); nothing was written"
            )
        del exported
    return {
        "out": str(out),
        "format": format,
        "quantize": quantize,
        "min_cosine": round(cosine, 6),
        "int8": quantization,
        "bytes": (out / FILE).stat().st_size,
    }


@contextlib.contextmanager
def _quiet():
    """The exporter and the quantiser warn a lot about things that do not matter here."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


class _Graph(torch.nn.Module):
    """The encoder as traced: (input_ids, lengths) -> vectors, fp32, eval mode."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, lengths):
        return self.encoder(input_ids, lengths).float()


def export_graph(encoder: torch.nn.Module, path: Path) -> None:
    encoder = copy.deepcopy(encoder).float().eval()
    vocab = int(encoder.model.config.vocab_size)
    ids = (torch.arange(32, dtype=torch.int64).reshape(2, 16) + 5) % vocab
    lengths = torch.tensor([16, 9], dtype=torch.int64)  # unequal: the mask must stay a computation, not a constant
    with _quiet(), torch.no_grad():
        torch.onnx.export(
            _Graph(encoder),
            (ids, lengths),
            str(path),
            input_names=["input_ids", "lengths"],
            output_names=["vectors"],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "lengths": {0: "batch"}, "vectors": {0: "batch"}},
        )


def quantize_int8(src: Path, dst: Path, ids: np.ndarray, lengths: np.ndarray) -> dict:
    """Dynamic int8 quantisation of the matmuls with weights (per output channel, 7-bit range:
    see the module's notes; activations quantised per batch at run time); embeddings, LayerNorm
    and softmax stay fp32.

    A matmul whose input has a few huge values (the FFN down-projections of all-mpnet-base-v2
    reach 130x their RMS) loses everything else to the per-batch activation scale: mpnet
    quantised whole gave a mean cosine of 0.88 to its fp32 vectors, MiniLM 0.993. So the
    matmuls are ranked by that ratio on the check texts, and the worst are kept in fp32, a few
    more each try, until the mean cosine reaches MIN_MEAN_COSINE_INT8.
    """
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from .encoders.onnx import session_options

    feeds = {"input_ids": ids, "lengths": lengths}
    graph = onnx.load(str(src))
    weights = {t.name for t in graph.graph.initializer}
    matmuls = [n for n in graph.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    inputs = sorted({n.input[0] for n in matmuls})
    for name in inputs:  # expose each matmul's input to measure its outliers
        graph.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    with _quiet():
        probe = ort.InferenceSession(graph.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
        values = dict(zip(["vectors", *inputs], probe.run(None, feeds)))
    del probe, graph
    reference, real = values["vectors"], np.arange(ids.shape[1])[None, :] < lengths[:, None]

    def outliers(x: np.ndarray) -> float:
        x = x[real] if x.shape[:2] == real.shape else x
        return float(np.abs(x).max() / max(np.sqrt(np.mean(np.square(x, dtype=np.float64))), 1e-12))

    ranked = [n.name for n in sorted(matmuls, key=lambda n: -outliers(values[n.input[0]]))]
    n = len(ranked)
    steps = sorted({0, *(min(n, -(-n // d)) for d in (16, 8, 4, 2, 1))})
    for keep in steps:
        with _quiet():
            quantize_dynamic(
                str(src),
                str(dst),
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                op_types_to_quantize=["MatMul"],
                nodes_to_exclude=ranked[:keep],
                # tensors ONNX's shape inference leaves untyped are fp32 here
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            session = ort.InferenceSession(str(dst), session_options(), providers=["CPUExecutionProvider"])
            vectors = session.run(None, feeds)[0]
        mean = float((vectors * reference).sum(1).mean())
        if mean >= MIN_MEAN_COSINE_INT8 or keep == n:
            return {"matmuls": n, "kept_fp32": ranked[:keep], "weight_bits": 7, "check_mean_cosine": round(mean, 5)}
    raise AssertionError("unreachable: the last step keeps every matmul in fp32")


__all__ = ["EXPORT_FORMATS", "QUANTIZATIONS", "check_export_options", "export_model"]


def export_folder(
    model_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    format: str = "onnx",
    quantize: str | None = None,
    overwrite: bool = False,
) -> RunReport:
    """The model folder ``model_dir`` exported to ``out``, as ``siamese export`` does: the options
    and ``out`` checked before the model is loaded (on the CPU, where ONNX is traced and then runs),
    :func:`export_model`, and the report."""
    check_export_options(format, quantize)  # before the model is loaded
    check_not_input(out, [model_dir])
    check_target(Path(out), overwrite=overwrite, kind="model")
    result = export_model(
        SiameseModel.load(model_dir, device="cpu"), out, format=format, quantize=quantize, overwrite=overwrite
    )
    line = (
        f"exported {model_dir} to {out} ({format}{', ' + quantize if quantize else ''}, "
        f"{result['bytes'] / 1e6:.1f} MB; cosine to the PyTorch model >= {result['min_cosine']:.4f})"
    )
    return RunReport(result, [line])
