"""The fast transformer path against sentence-transformers, same model, same texts, same run.

For each model (all-MiniLM-L6-v2 by default; ``--models minilm,mpnet`` adds all-mpnet-base-v2),
encodes the Quora sample's questions plus the STS-B test sentences with:

- sentence-transformers: ``SentenceTransformer(<the same Hugging Face folder>).encode(texts, batch_size=...)``
- ours fp32: ``SiameseModel.encode(texts, precision="fp32")`` (length-sorted batches)
- ours bf16: bf16 autocast (only on CPUs with native bf16: AVX512-BF16 / AMX)
- ours ONNX fp32 / ONNX int8: the folders ``siamese export --format onnx [--quantize int8]`` writes

Speed is texts/s, the median of ``--rounds`` rounds in which the variants take turns (so a
busy neighbour slows all of them alike); quality is the Quora sample's ROC-AUC and the STS-B
test Spearman (x100) from each variant's own vectors, plus the cosine to ours fp32.

    .venv/bin/pip install -e '.[bench]'        # sentence-transformers
    .venv/bin/python bench/fast_transformer.py [--models minilm,mpnet] [--rounds 3]
    .venv/bin/python bench/fast_transformer.py --limit 40 --rounds 1   # a quick check that it runs

Writes bench/results/fast_transformer.json (``--out``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from siamese import ModelConfig, SiameseModel, datasets  # noqa: E402
from siamese.evaluation.metrics import classification_report, correlation_report  # noqa: E402
from siamese.io.atomic import atomic_file  # noqa: E402
from siamese.models.export import export_model  # noqa: E402
from siamese.models.pretrained import model_folder  # noqa: E402
from siamese.runtime.precision import native_bf16  # noqa: E402

HERE = Path(__file__).resolve().parent
ST = "sentence-transformers"


def load_texts(limit: int | None):
    """The Quora sample's pairs and STS-B test's, and every text of both in one list."""
    quora, sts = datasets.load("quora-sample"), datasets.load("sts-test")
    if limit:
        quora, sts = quora.subset(range(min(limit, len(quora)))), sts.subset(range(min(limit, len(sts))))
    texts = list(quora.text1) + list(quora.text2) + list(sts.text1) + list(sts.text2)
    return quora, sts, texts


def quality(vectors: np.ndarray, quora, sts) -> dict:
    v = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    nq, ns = len(quora), len(sts)
    q_scores = (v[:nq] * v[nq : 2 * nq]).sum(1)
    s_scores = (v[2 * nq : 2 * nq + ns] * v[2 * nq + ns :]).sum(1)
    report = classification_report(q_scores, quora.labels, 0.5)
    return {
        "quora_roc_auc": round(report["roc_auc"], 4) if report["roc_auc"] is not None else None,
        "sts_spearman": round(correlation_report(s_scores, sts.scores)["spearman"], 2),
    }


def variants(name: str, texts: list[str], batch_size: int, st_batch_size: int, workdir: Path) -> tuple[dict, dict]:
    """name -> a function encoding ``texts``; and how long each export took."""
    from sentence_transformers import SentenceTransformer

    folder = model_folder(name)
    st = SentenceTransformer(str(folder), device="cpu")
    ours = SiameseModel.build([], ModelConfig(encoder="transformer", encoder_options={"path": name}))
    ours.save(workdir / name)
    ours = SiameseModel.load(workdir / name)
    exports, folders = {}, {}
    for quantize in (None, "int8"):
        t0 = time.perf_counter()
        out = workdir / f"{name}-onnx-{quantize or 'fp32'}"
        export_model(ours, out, quantize=quantize)
        exports[quantize or "fp32"] = round(time.perf_counter() - t0, 1)
        folders[quantize or "fp32"] = SiameseModel.load(out)
    run = {
        ST: lambda: st.encode(texts, batch_size=st_batch_size, convert_to_numpy=True),
        "ours fp32": lambda: ours.encode(texts, batch_size=batch_size, precision="fp32"),
    }
    if native_bf16():
        run["ours bf16"] = lambda: ours.encode(texts, batch_size=batch_size, precision="bf16")
    run["ours onnx fp32"] = lambda: folders["fp32"].encode(texts, batch_size=batch_size)
    run["ours onnx int8"] = lambda: folders["int8"].encode(texts, batch_size=batch_size)
    return run, exports


def measure(run: dict, texts: list[str], rounds: int) -> tuple[dict, dict]:
    """Interleaved rounds: texts/s of each variant per round, and its last vectors."""
    speeds = {k: [] for k in run}
    vectors = {}
    for fn in run.values():  # warm-up: first calls build oneDNN/ORT kernels and caches
        fn()
    for _ in range(rounds):
        for k, fn in run.items():
            t0 = time.perf_counter()
            vectors[k] = np.asarray(fn(), dtype=np.float32)
            speeds[k].append(len(texts) / (time.perf_counter() - t0))
    return speeds, vectors


def bench_model(name: str, args, quora, sts, texts) -> dict:
    with tempfile.TemporaryDirectory(prefix="fast-transformer-") as tmp:
        run, exports = variants(name, texts, args.batch_size, args.st_batch_size, Path(tmp))
        speeds, vectors = measure(run, texts, args.rounds)
    st_speed = statistics.median(speeds[ST])
    reference = vectors["ours fp32"]
    rows = {}
    for k in run:
        cos = (vectors[k] * reference).sum(1) / np.linalg.norm(vectors[k], axis=1) / np.linalg.norm(reference, axis=1)
        median = statistics.median(speeds[k])
        rows[k] = {
            "texts_per_s": round(median, 1),
            "rounds": [round(s, 1) for s in speeds[k]],
            "ratio_to_st": round(median / st_speed, 2),
            **quality(vectors[k], quora, sts),
            "cosine_to_ours_fp32": {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 5)},
        }
    return {"folder": str(model_folder(name)), "export_seconds": exports, "variants": rows}


def machine() -> dict:
    import onnxruntime
    import sentence_transformers

    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "native_bf16": native_bf16(),
        "avx512_vnni": "avx512_vnni" in flags,
        "avx2": "avx2" in flags,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "onnxruntime": onnxruntime.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def table(results: dict) -> str:
    lines = [
        "| model | variant | texts/s | × sentence-transformers | Quora ROC-AUC | STS-B ρ | min cos to fp32 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results["models"].items():
        for k, v in r["variants"].items():
            lines.append(
                f"| {name} | {k} | {v['texts_per_s']:,.0f} | {v['ratio_to_st']:.2f} | {v['quora_roc_auc']} | "
                f"{v['sts_spearman']} | {v['cosine_to_ours_fp32']['min']:.4f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", default="minilm", help="comma-separated: minilm, mpnet (make mpnet), or Hugging Face folders"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (the median is reported)")
    parser.add_argument("--batch-size", type=int, default=64, help="our batch size")
    parser.add_argument(
        "--st-batch-size", type=int, default=32, help="sentence-transformers' batch size (its default: 32)"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N pairs of each set (a quick check)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "fast_transformer.json")
    args = parser.parse_args()

    quora, sts, texts = load_texts(args.limit)
    results = {
        "machine": machine(),
        "texts": len(texts),
        "quora_pairs": len(quora),
        "sts_pairs": len(sts),
        "rounds": args.rounds,
        "batch_size": args.batch_size,
        "st_batch_size": args.st_batch_size,
        "limit": args.limit,
        "models": {},
    }
    for name in args.models.split(","):
        results["models"][name] = bench_model(name.strip(), args, quora, sts, texts)
        print(f"{name}: done", flush=True)
    with atomic_file(args.out) as tmp:
        tmp.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"\n{len(texts)} texts, median of {args.rounds} interleaved rounds; written to {args.out}")


if __name__ == "__main__":
    main()
