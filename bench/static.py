"""Static models side by side, in one run: our distilled student vs WordLlama (its PyPI wheel's
weights), a plain model2vec distillation of the same MiniLM (built offline here), and MiniLM
itself (ours, with the fast path; and sentence-transformers' own encode).

Quality: ROC-AUC on the Quora sample, MSRP test, PAWS-Wiki test and MQP, Spearman x 100 on STS-B
test. Speed: texts/s on the same texts (the test sets' texts; the static models' list is repeated
10x so a round lasts long enough to time), median of interleaved rounds, after a warm-up. Size: the
weights on disk.

    .venv/bin/python bench/static.py --student runs/student-minilm [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from siamese import SiameseModel, datasets  # noqa: E402
from siamese.models.pretrained import default_model_path  # noqa: E402

SETS = {"quora-sample": "auc", "sts-test": "spearman", "msrp-test": "auc", "paws-wiki-test": "auc", "mqp": "auc"}
RESULTS = Path(__file__).parent / "results" / "static.json"


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def folder_bytes(path: Path) -> int:
    return sum(
        f.stat().st_size
        for f in Path(path).rglob("*")
        if f.is_file() and f.suffix in (".safetensors", ".onnx", ".npy", ".bin")
    )


def wordllama():
    """WordLlama's default model from its wheel (its loader looks for the tokenizer config in a
    folder the wheel does not use: point it at the wheel's own copy; nothing is downloaded)."""
    import wordllama
    from wordllama import WordLlama

    package = Path(wordllama.__file__).parent
    cache = Path(tempfile.mkdtemp(prefix="wordllama-"))
    (cache / "tokenizers").symlink_to(package / "tokenizers")
    model = WordLlama.load(cache_dir=cache, disable_download=True)
    return lambda texts: unit(model.embed(list(texts))), folder_bytes(package / "weights")


def model2vec_minilm(out: Path):
    """model2vec's plain distillation of the same all-MiniLM-L6-v2 (PCA 256, its defaults)."""
    from model2vec import StaticModel
    from model2vec.distill import distill

    if not (out / "model.safetensors").is_file():
        distill(model_name=str(default_model_path()), pca_dims=256).save_pretrained(str(out))
    model = StaticModel.from_pretrained(str(out))
    return lambda texts: unit(model.encode(list(texts))), folder_bytes(out)


def sentence_transformers_minilm():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_model_path()), device="cpu")
    return lambda texts: unit(model.encode(list(texts), batch_size=64, show_progress_bar=False)), folder_bytes(
        default_model_path()
    )


def ours(path):
    model = SiameseModel.load(path)
    return lambda texts: model.encode(list(texts)), folder_bytes(path)


def quality(encode) -> dict:
    out = {}
    for name, kind in SETS.items():
        pairs = datasets.load(name)
        a, b = encode(pairs.text1), encode(pairs.text2)
        s = (a * b).sum(1)
        out[name] = (
            round(100 * spearmanr(s, pairs.scores).statistic, 2)
            if kind == "spearman"
            else round(roc_auc_score(pairs.labels, s), 4)
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--student", type=Path, required=True, help="our static student folder (siamese distill)")
    ap.add_argument("--student-sts", type=Path, default=None, help="the student fine-tuned on STS-B train (optional)")
    ap.add_argument(
        "--minilm",
        type=Path,
        default=None,
        help="our MiniLM folder to time (default: siamese pretrained minilm, built here)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("runs/bench-static"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    minilm_dir = args.minilm
    if minilm_dir is None:
        from siamese.models.sentence_encoder import from_pretrained

        minilm_dir = args.work / "minilm"
        if not (minilm_dir / "config.json").is_file():
            from_pretrained("minilm").save(minilm_dir)
    contenders = {
        "siamese student": ours(args.student),
        **({"siamese student + STS-B fine-tune": ours(args.student_sts)} if args.student_sts else {}),
        "WordLlama (l2_supercat 256)": wordllama(),
        "model2vec distill of MiniLM": model2vec_minilm(args.work / "model2vec-minilm"),
        "MiniLM, ours (fast path)": ours(minilm_dir),
        "MiniLM, sentence-transformers": sentence_transformers_minilm(),
    }
    static = {
        "siamese student",
        "siamese student + STS-B fine-tune",
        "WordLlama (l2_supercat 256)",
        "model2vec distill of MiniLM",
    }
    texts = list(dict.fromkeys(t for name in SETS for p in [datasets.load(name)] for t in p.text1 + p.text2))
    results = {name: {"quality": quality(encode), "bytes": size} for name, (encode, size) in contenders.items()}
    timings: dict[str, list[float]] = {name: [] for name in contenders}
    for encode, _ in contenders.values():  # warm-up: first-call costs (threads, caches) out of the timing
        encode(texts[:256])
    for _ in range(args.rounds):
        for name, (encode, _) in contenders.items():
            batch = texts * 10 if name in static else texts
            started = time.perf_counter()
            encode(batch)
            timings[name].append(len(batch) / (time.perf_counter() - started))
    minilm_speed = statistics.median(timings["MiniLM, ours (fast path)"])
    st_speed = statistics.median(timings["MiniLM, sentence-transformers"])
    for name in contenders:
        speed = statistics.median(timings[name])
        results[name].update(
            texts_per_second=round(speed),
            rounds=[round(t) for t in timings[name]],
            x_minilm_ours=round(speed / minilm_speed, 1),
            x_minilm_st=round(speed / st_speed, 1),
        )
    report = {
        "texts": len(texts),
        "rounds": args.rounds,
        "student": str(args.student),
        "results": results,
        "machine": os.uname().machine,
        "cpu": _cpu(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(
        "| model | Quora ROC-AUC | STS-B test ρ | MSRP | PAWS-Wiki | MQP | texts/s "
        "| × MiniLM (ours) | × MiniLM (ST) | MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        q = r["quality"]
        print(
            f"| {name} | {q['quora-sample']:.3f} | {q['sts-test']:.1f} | {q['msrp-test']:.3f} "
            f"| {q['paws-wiki-test']:.3f} | {q['mqp']:.3f} | {r['texts_per_second']:,} "
            f"| {r['x_minilm_ours']} | {r['x_minilm_st']} | {r['bytes'] / 1e6:.0f} |"
        )


def _cpu() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    main()
