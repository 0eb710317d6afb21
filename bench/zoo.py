"""The model zoo benchmark: every sensible recipe trained on the same shared data, one table.

Each recipe trains on siamese.data.datasets.TRAIN (its duplicates for the in-batch losses, every
labelled pair for bce/contrastive), validates on VALIDATION, and is tested on ZOO_BENCHMARKS
with each set's threshold chosen on its own validation split (Quora sample, SemEval CQA dev and
MQP: the threshold chosen on VALIDATION at training time). Reference rows: all-MiniLM-L6-v2 used
as-is and TF-IDF cosine. Per recipe: training seconds, texts/s at inference, parameters.

    .venv/bin/python bench/zoo.py                                 # everything; see docs/benchmarks.md
    .venv/bin/python bench/zoo.py --recipes lstm-cosine-triplet minilm-as-is --quick   # a smoke run
    .venv/bin/python bench/zoo.py --list

Writes bench/results/zoo.json and, unless --no-docs, the table between the zoo markers of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.evaluation.baselines import TfidfBaseline
from siamese.evaluation.metrics import benchmark, choose_threshold

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "benchmarks.md"
GLOVE = "glove/glove-50d-5k.json"
ZOO_BENCHMARKS: dict[str, str | None] = {**datasets.BENCHMARKS, "semeval-dev": None, "mqp": None}
# Fine-tuning a transformer on 2 CPU cores runs at tens of pairs/s, and a BiLSTM(256) at a few
# hundred: they see a sample of the data.
TRANSFORMER_SAMPLE = 6000
BILSTM_SAMPLE = 30_000
MPNET = {"encoder": "transformer", "encoder_options": {"path": "mpnet"}}  # all-mpnet-base-v2: make mpnet
# Unseen words hashed into buckets (they still match across two texts); ordered word pairs up to
# 12 apart, pooled apart from the words and mixed in at 0.7.
BOW_OOV_PAIRS = {
    "encoder": "bow",
    "max_vocab": None,
    "oov_buckets": 16384,
    "encoder_options": {"ngrams": 2, "window": 12, "pair_mix": 0.7},
}


@dataclass
class Recipe:
    name: str
    model: dict = field(default_factory=dict)  # ModelConfig keywords
    train: dict = field(default_factory=dict)  # TrainConfig keywords
    glove: bool = False
    sample: int | None = None  # train on this many pairs drawn at random (None: all)
    trained: bool = True  # False: the pretrained encoder as-is
    train_sets: list[str] | None = None  # None: datasets.TRAIN
    # Drop training pairs that share a text with a benchmark set (before sampling): a student that
    # imitates a teacher's vector of a test sentence would carry it into the test.
    exclude_test_texts: bool = False
    # Validate on this many of the recipe's own training pairs (none of the rest sharing a text with
    # them) instead of the validation mix: a specialist's epoch and threshold chosen on its own kind of pairs.
    val_holdout: int = 0


RECIPES = [
    Recipe("lstm-cosine-triplet", {}, {"epochs": 8}),  # the foundation model
    Recipe("lstm-attention-cosine-mnr", {"loss": "mnr", "encoder_options": {"pooling": "attention"}}, {"epochs": 8}),
    Recipe(
        "bilstm-glove-l1-bce",
        {"encoder": "bilstm", "head": "l1", "loss": "bce"},
        {"epochs": 3},
        glove=True,
        sample=BILSTM_SAMPLE,
    ),
    Recipe(
        "bilstm-glove-manhattan-contrastive",
        {"encoder": "bilstm", "head": "manhattan", "loss": "contrastive", "encoder_options": {"hidden": 50}},
        {"epochs": 4},
        glove=True,
    ),
    Recipe(
        "bilstm-glove-symmetric-bce",
        {"encoder": "bilstm", "head": "symmetric", "loss": "bce", "encoder_options": {"pooling": "max"}},
        {"epochs": 3},
        glove=True,
        sample=BILSTM_SAMPLE,
    ),
    Recipe(
        "bilstm-max-glove-cosine-hinge",
        {"encoder": "bilstm-max", "loss": "hinge", "encoder_options": {"hidden": 128, "out_dim": 128}},
        {"epochs": 6},
        glove=True,
    ),
    Recipe("cnn-glove-cosine-hinge", {"encoder": "cnn", "loss": "hinge"}, {"epochs": 6}, glove=True),
    Recipe("cnn-glove-cosine-triplet", {"encoder": "cnn"}, {"epochs": 6}, glove=True),
    Recipe("cnn-glove-cosine-cosent", {"encoder": "cnn", "loss": "cosent"}, {"epochs": 6}, glove=True),
    Recipe("bow-cosine-triplet", {"encoder": "bow"}, {"epochs": 6}),
    Recipe(
        "bow-bigrams-cosine-triplet",
        {"encoder": "bow", "dim": 512, "encoder_options": {"ngrams": 2, "bigram_weight": 0.5}},
        {"epochs": 6},
    ),
    # settings chosen on validation sets only (docs/benchmarks.md)
    Recipe("bow-oov-pairs-cosine-triplet", BOW_OOV_PAIRS, {"epochs": 6}),
    # The same at 512 dimensions: random vectors of unrelated rare words collide less (validation:
    # MSRP +0.4, Twitter URL +0.6 points, the rest level; docs/benchmarks.md).
    Recipe("bow-oov-pairs-512-cosine-triplet", {**BOW_OOV_PAIRS, "dim": 512}, {"epochs": 6}),
    # ... and each word's character n-grams (3-5, fastText's subwords) pooled as a third part,
    # with the pairs' share raised to match (all chosen on validation: docs/benchmarks.md).
    Recipe(
        "bow-oov-pairs-chars-cosine-triplet",
        {
            **BOW_OOV_PAIRS,
            "char_ngrams": [3, 5],
            "char_buckets": 1 << 17,
            "encoder_options": {**BOW_OOV_PAIRS["encoder_options"], "pair_mix": 1.0, "char_mix": 1.0},
        },
        {"epochs": 6},
    ),
    # The same bag of words taught by all-MiniLM-L6-v2: every in-batch cosine of every training
    # pair (labels unused) matched to the teacher's; pairs sharing a text with a test set dropped.
    Recipe(
        "bow-oov-pairs-cosine-distill-minilm",
        {**BOW_OOV_PAIRS, "loss": "distill"},
        {"epochs": 6, "teacher": "minilm"},
        exclude_test_texts=True,
    ),
    Recipe("minilm-as-is", {"encoder": "transformer"}, trained=False),
    Recipe("mpnet-as-is", MPNET, trained=False),  # a larger pretrained encoder (and the distillation teacher)
    Recipe(
        "minilm-mnr-2e-6",
        {"encoder": "transformer", "loss": "mnr"},
        {"epochs": 1, "batch_size": 32},
        sample=TRANSFORMER_SAMPLE,
    ),
    Recipe(
        "minilm-mnr-2e-5",
        {"encoder": "transformer", "loss": "mnr"},
        {"epochs": 1, "batch_size": 32, "lr": 2e-5},
        sample=TRANSFORMER_SAMPLE,
    ),
    Recipe(
        "minilm-cosent-sts-2e-5",
        {"encoder": "transformer", "loss": "cosent"},
        {"epochs": 1, "batch_size": 16, "lr": 2e-5, "warmup_steps": 36},
        train_sets=["sts-train"],
    ),
    # graded STS-B mixed with question pairs (label 1 = score 5), then half the pretrained weights mixed back in
    Recipe(
        "minilm-cosent-mix-keep-0.5",
        {"encoder": "transformer", "loss": "cosent"},
        {"epochs": 1, "batch_size": 16, "lr": 1e-5, "warmup_steps": 36, "keep_initial": 0.5},
        train_sets=["sts-train", "semeval-train", "insuranceqa-pairs"],
    ),
    # the same recipe from a larger start: all-mpnet-base-v2 (110M parameters, PyPI parts, make mpnet)
    Recipe(
        "mpnet-cosent-mix-keep-0.5",
        {**MPNET, "loss": "cosent"},
        {"epochs": 1, "batch_size": 16, "lr": 1e-5, "warmup_steps": 36, "keep_initial": 0.5},
        train_sets=["sts-train", "semeval-train", "insuranceqa-pairs"],
    ),
    Recipe(
        "minilm-concat-bce-2e-5",
        {"encoder": "transformer", "head": "concat", "loss": "bce"},
        {"epochs": 1, "batch_size": 32, "lr": 2e-5},
        sample=TRANSFORMER_SAMPLE,
    ),
    # A cross-encoder (both texts read together) from MiniLM's weights, on the labelled question and
    # paraphrase pairs (PAWS-QQP's word-order traps included), both orders (siamese.cross).
    Recipe(
        "cross-encoder-best",
        {"encoder": "transformer", "cross": True},
        {"epochs": 1, "batch_size": 16, "lr": 5e-5},
        train_sets=["paws-qqp-train", "msrp-train", "semeval-train"],
    ),
    # The same with less of PAWS-QQP's word-order traps and more ordinary paraphrase and question
    # pairs (Quora's non-duplicates are questions on the same topic, not swaps): 20k pairs drawn
    # from six sets.
    Recipe(
        "cross-encoder-mix",
        {"encoder": "transformer", "cross": True},
        {"epochs": 1, "batch_size": 16, "lr": 5e-5},
        sample=20_000,
        train_sets=["semeval-train", "msrp-train", "sick-train", "twitter-url-train", "paws-qqp-train", "sts-train"],
    ),
    # The same with PAWS-Wiki's labelled pairs (its dev split: the shared data holds no PAWS-Wiki
    # train) in place of PAWS-QQP and Twitter URL: word-order pairs from the kind of sentences
    # PAWS-Wiki tests. Pairs sharing a text with any test set are dropped.
    Recipe(
        "cross-encoder-paws-wiki",
        {"encoder": "transformer", "cross": True},
        {"epochs": 1, "batch_size": 16, "lr": 5e-5},
        sample=20_000,
        exclude_test_texts=True,
        train_sets=["paws-wiki-dev", "semeval-train", "msrp-train", "sick-train", "sts-train"],
    ),
    # A PAWS-Wiki specialist: PAWS-Wiki dev alone for three epochs (the mixed recipe above ended
    # its one epoch at training loss 0.59, still falling), the epoch and threshold chosen on 500
    # held-out pairs of it rather than on the validation mix (MSRP/STS-B/SICK, which reward overlap).
    # PAWS pairs share sentences: dropping those of the held-out pairs leaves 5,876 to train on.
    Recipe(
        "cross-encoder-paws-wiki-only",
        {"encoder": "transformer", "cross": True},
        {"epochs": 3, "batch_size": 16, "lr": 5e-5},
        exclude_test_texts=True,
        val_holdout=500,
        train_sets=["paws-wiki-dev"],
    ),
    # The same specialist from all-mpnet-base-v2's weights (`make mpnet` first). ~7x slower to train
    # than MiniLM here: one epoch over both orders (~55 min on two AVX2 cores) is what fits a session;
    # lr 3e-5, between BERT-base's usual 2e-5 and MiniLM's 5e-5.
    Recipe(
        "cross-encoder-mpnet-paws-wiki-only",
        {**MPNET, "cross": True},
        {"epochs": 1, "batch_size": 16, "lr": 3e-5},
        exclude_test_texts=True,
        val_holdout=500,
        train_sets=["paws-wiki-dev"],
    ),
    # A cross-encoder that corrects a bi-encoder: mpnet as-is gives the starting logit (its cosine,
    # scaled on the validation mix), MiniLM reads the pair and learns only what mpnet misses
    # (word order, the one word that differs), on word-order pairs from both PAWS sets and on
    # question and paraphrase pairs. Pairs sharing a text with any test set are dropped.
    Recipe(
        "cross-encoder-prior",
        {"encoder": "transformer", "cross": True, "encoder_options": {"prior": "mpnet"}},
        {"epochs": 1, "batch_size": 16, "lr": 5e-5},
        sample=10_000,
        exclude_test_texts=True,
        train_sets=["paws-wiki-dev", "paws-qqp-train", "semeval-train", "msrp-train"],
    ),
]


def texts_per_second(model: SiameseModel, texts: list[str], rounds: int = 3) -> float:
    """Median encoding throughput over a few passes."""
    speeds = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        model.encode(texts)
        speeds.append(len(texts) / (time.perf_counter() - t0))
    return float(np.median(speeds))


def pairs_per_second(model, pairs, rounds: int = 3) -> float:
    """A cross-encoder's median scoring throughput (pairs, both orders each) over a few passes."""
    speeds = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        model.similarity_pairwise(pairs.text1, pairs.text2)
        speeds.append(len(pairs) / (time.perf_counter() - t0))
    return float(np.median(speeds))


def run_recipe(recipe: Recipe, train_pairs, val_pairs, root: Path, args) -> dict:
    model_kwargs = dict(recipe.model, seed=args.seed)
    if recipe.glove:
        model_kwargs["glove"] = str(root / GLOVE)
    config = ModelConfig(**model_kwargs)
    started = time.perf_counter()
    if recipe.trained:
        pairs = datasets.load_many(recipe.train_sets, root) if recipe.train_sets else train_pairs
        if recipe.exclude_test_texts:
            pairs = without_texts(pairs, benchmark_texts(root))
        if recipe.val_holdout:
            held = np.random.default_rng(args.seed).permutation(len(pairs))
            val_pairs = pairs.subset(held[: recipe.val_holdout])
            pairs = without_texts(
                pairs.subset(held[recipe.val_holdout :]), {normal(t) for t in val_pairs.text1 + val_pairs.text2}
            )
        limit = args.limit if args.limit else recipe.sample
        if limit and limit < len(pairs):
            pairs = pairs.subset(np.random.default_rng(args.seed).choice(len(pairs), limit, replace=False))
        train_kwargs = dict(recipe.train, seed=args.seed)
        if args.quick:
            train_kwargs["epochs"] = 1
        model = train(pairs, val_pairs, model_config=config, config=TrainConfig(**train_kwargs), progress=args.progress)
        if args.save_models:  # e.g. a cross-encoder for dedupe --verify or search --rerank
            model.save(args.save_models / recipe.name, overwrite=True)
        training = model.info["training"]
        fit = {
            "train_pairs_seen": sum(h["pairs"] for h in training["history"]),
            "best_epoch": training["best_epoch"],
            "epochs": len(training["history"]),
            "lr": training["config"]["lr"],
        }
    else:
        model = SiameseModel.build([], config)
        sims = model.similarity_pairwise(val_pairs.text1, val_pairs.text2)
        model.threshold, _ = choose_threshold(sims, val_pairs.labels, args.threshold_metric)
        fit = {}
    seconds = time.perf_counter() - started
    speed_texts = datasets.load("quora-sample", root)
    results = benchmark(
        model.similarity_pairwise,
        ZOO_BENCHMARKS,
        default_threshold=model.threshold,
        root=root,
        metric=args.threshold_metric,
    )
    if getattr(model, "kind", None) == "cross":  # no vectors: its speed is pairs scored per second
        speed = pairs_per_second(model, speed_texts)
        params = sum(p.numel() for p in model.network.parameters())
    else:
        speed = texts_per_second(model, speed_texts.text1 + speed_texts.text2)
        params = sum(p.numel() for m in (model.encoder, model.head) for p in m.parameters())
    return {
        "recipe": recipe.name,
        "config": {
            "model": recipe.model,
            "train": recipe.train,
            "glove": recipe.glove,
            "sample": recipe.sample,
            "train_sets": recipe.train_sets or datasets.TRAIN,
            "exclude_test_texts": recipe.exclude_test_texts,
            "val_holdout": recipe.val_holdout,
        },
        "train_seconds": round(seconds, 1) if recipe.trained else 0.0,
        **fit,
        "texts_per_second": round(speed),
        "speed_unit": "pairs" if getattr(model, "kind", None) == "cross" else "texts",
        "parameters": params,
        "threshold": model.threshold,
        "glove": model.info.get("glove"),
        "results": results,
    }


def benchmark_texts(root: Path) -> set[str]:
    """Every text of the benchmark sets, lowercased with whitespace collapsed."""
    return {normal(t) for name in ZOO_BENCHMARKS for p in [datasets.load(name, root)] for t in p.text1 + p.text2}


def without_texts(pairs, texts: set[str]):
    keep = [
        i for i, (a, b) in enumerate(zip(pairs.text1, pairs.text2)) if normal(a) not in texts and normal(b) not in texts
    ]
    return pairs.subset(keep)


def normal(text: str) -> str:
    return " ".join(text.lower().split())


def run_tfidf(train_pairs, val_pairs, root: Path, args) -> dict:
    tfidf = TfidfBaseline().fit(train_pairs.text1 + train_pairs.text2)
    threshold, _ = choose_threshold(
        tfidf.similarity_pairwise(val_pairs.text1, val_pairs.text2), val_pairs.labels, args.threshold_metric
    )
    results = benchmark(
        tfidf.similarity_pairwise, ZOO_BENCHMARKS, default_threshold=threshold, root=root, metric=args.threshold_metric
    )
    return {
        "recipe": "tfidf-cosine",
        "train_seconds": 0.0,
        "texts_per_second": None,
        "parameters": len(tfidf.vectorizer.vocabulary_),
        "threshold": threshold,
        "results": results,
    }


def cell(r: dict) -> str:
    """ROC-AUC (and Spearman on graded sets): the docs table stays short; accuracy and F1 stay in the JSON."""
    return f"{r['roc_auc']:.3f}" + (f" · ρ {r['spearman']:.1f}" if "spearman" in r else "")


def table(rows: list[dict]) -> str:
    sets = list(ZOO_BENCHMARKS)
    out = [
        "| recipe | train s | texts/s | params | " + " | ".join(sets) + " |",
        "|---|---:|---:|---:|" + "---|" * len(sets),
    ]
    best = {s: max(row["results"][s]["roc_auc"] for row in rows) for s in sets}
    for row in rows:
        cells = []
        for s in sets:
            c = cell(row["results"][s])
            cells.append(f"**{c}**" if row["results"][s]["roc_auc"] == best[s] else c)
        speed = f"{row['texts_per_second']:,}" if row["texts_per_second"] else "–"
        if row.get("speed_unit") == "pairs":
            speed += " pairs"
        params = (
            f"{row['parameters'] / 1e6:.2f}M" if row["recipe"] != "tfidf-cosine" else f"{row['parameters']:,} terms"
        )
        out.append(f"| {row['recipe']} | {row['train_seconds']:.0f} | {speed} | {params} | {' | '.join(cells)} |")
    return "\n".join(out)


def write_docs(markdown: str, command: str, section: str = "zoo", title: str = "The model zoo") -> None:
    """Put the command and the table between ``<!-- section:start -->`` and ``<!-- section:end -->``
    of docs/benchmarks.md (a new section at the end the first time)."""
    start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
    text = DOCS.read_text()
    block = f"{start}\n```bash\n{command}\n```\n\n{markdown}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text += f"\n## {title}\n\n{block}\n"
    DOCS.write_text(text)


def earlier_rows(path: Path, settings: dict) -> dict:
    """Rows of an earlier run with the same settings, by recipe: the zoo can be run in parts."""
    if not path.is_file():
        return {}
    earlier = json.loads(path.read_text())
    if earlier.get("settings") != settings:
        return {}
    return {row["recipe"]: row for row in earlier["rows"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipes", nargs="*", help="Recipe names (default: all, plus TF-IDF).")
    p.add_argument("--list", action="store_true", help="List the recipes and exit.")
    p.add_argument("--quick", action="store_true", help="Smoke run: 1 epoch, at most --limit pairs.")
    p.add_argument("--limit", type=int, default=None, help="Train every recipe on at most this many pairs.")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice).")
    p.add_argument("--threshold-metric", default="accuracy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--progress", action="store_true")
    p.add_argument(
        "--save-models",
        type=Path,
        default=None,
        help="Save each trained model in this folder (one sub-folder per recipe).",
    )
    p.add_argument("--no-docs", action="store_true", help="Do not write the table into docs/benchmarks.md.")
    p.add_argument("--out", type=Path, default=HERE / "results" / "zoo.json")
    p.add_argument("--table-only", action="store_true", help="Only rewrite the docs table from the rows in --out.")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="Forget earlier rows in --out (default: keep the rows of recipes not re-run, "
        "if run with the same settings).",
    )
    args = p.parse_args()
    if args.list:
        for r in RECIPES:
            print(
                f"{r.name:<40} {r.model} {r.train}{' glove' if r.glove else ''}"
                f"{f' sample {r.sample}' if r.sample else ''}"
            )
        return
    if args.quick and not args.limit:
        args.limit = 2000
    if args.threads:
        torch.set_num_threads(args.threads)
    by_name = {r.name: r for r in RECIPES}
    chosen = [by_name[n] for n in args.recipes if n in by_name] if args.recipes else RECIPES  # in the order given
    unknown = set(args.recipes or []) - set(by_name) - {"tfidf-cosine"}
    if unknown:
        raise SystemExit(f"unknown recipe(s): {', '.join(sorted(unknown))} (see --list)")

    root = datasets.data_root()
    train_pairs = datasets.load_many(datasets.TRAIN, root)
    val_pairs = datasets.load_many(datasets.VALIDATION, root)
    settings = {k: str(getattr(args, k)) for k in ("limit", "quick", "seed", "threshold_metric")}
    rows = {} if args.fresh else earlier_rows(args.out, settings)
    if args.table_only:
        chosen, args.recipes = [], ["none"]
    if not args.recipes or "tfidf-cosine" in args.recipes:
        rows["tfidf-cosine"] = run_tfidf(train_pairs, val_pairs, root, args)
    for recipe in chosen:
        t0 = time.perf_counter()
        rows[recipe.name] = run_recipe(recipe, train_pairs, val_pairs, root, args)
        print(f"{recipe.name}: {time.perf_counter() - t0:.0f}s", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        ordered = [rows[n] for n in ["tfidf-cosine", *(r.name for r in RECIPES)] if n in rows]
        args.out.write_text(json.dumps({"settings": settings, "rows": ordered}, indent=2) + "\n")
    rows = [rows[n] for n in ["tfidf-cosine", *(r.name for r in RECIPES)] if n in rows]
    markdown = table(rows)
    print(markdown)
    if not args.no_docs:
        flags = " ".join(
            f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if v not in (None, False) and k in ("limit", "threads", "quick", "seed") and not (k == "seed" and v == 0)
        ).replace("--quick True", "--quick")
        write_docs(markdown, f"HF_HUB_OFFLINE=1 .venv/bin/python bench/zoo.py {flags}" if flags else "make bench-zoo")


if __name__ == "__main__":
    main()
