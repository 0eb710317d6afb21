"""The emoji models on the shared data: the convolutional VAE (losses, inf/NaN codes, seconds per
epoch) and the text→emoji model (held-out 3-way accuracy beside the majority class and TF-IDF +
logistic regression; how often its top-5 among all 874 emojis share the tweet's sentiment),
pixels-only (the seed) and sentiment-aware. Writes JSON, the docs' example images, and prints
markdown.

    .venv/bin/python bench/emoji.py [--vae-epochs 15] [--vae DIR] [--sqam-epochs 10] [--seed 0]
    .venv/bin/python bench/emoji.py --vae DIR --encoders bilstm minilm mpnet student:DIR minilm+ft [--split-seeds 0 1 2]
    .venv/bin/python bench/emoji.py --table

``--vae DIR`` reuses a VAE trained by ``siamese emoji train-vae`` instead of training one.
``--encoders`` compares text sides of the sentiment-aware model on the same seeded splits (with
TF-IDF + LR on each) and merges the rows into ``results/emoji-encoders.json``; ``--table``
prints that file as markdown.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from PIL import Image

from siamese.data.datasets import data_root
from siamese.emoji.generate import write_sheets
from siamese.emoji.images import load_emojis, name_to_char
from siamese.emoji.sheets import save_strip
from siamese.emoji.text_model import TextEmojiConfig
from siamese.emoji.text_model_eval import train_and_evaluate
from siamese.emoji.text_model_train import TextEmojiTrainConfig
from siamese.emoji.tweets import read_tweets
from siamese.emoji.vae import EmojiVAE, VAEConfig
from siamese.emoji.vae_train import VAETrainConfig, train_vae
from siamese.io.atomic import atomic_file

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "images"
# Three example tweets.
EXAMPLES = [
    "@united Flight is awful only one lavatory functioning, and people lining up, bumping, etc. "
    "because can't use 1st class bathroom. Ridiculous",
    "@usairways I've called for 3 days and can't get thru. "
    "is there some secret method i can use that doesn't result in you hanging up on me?",
    "@AmericanAir Let's all have a extraordinary week and make it a year to remember #GoingForGreat 2015 "
    "thanks so much American Airlines!!!",
]


def small_png(source: Path, target: Path, colors: int = 32) -> None:
    """A palette copy for the docs: a few tens of kB instead of hundreds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    Image.open(source).convert("RGB").quantize(colors).save(target, optimize=True)


def encoder_spec(label: str) -> tuple[str, bool]:
    """A table row's label → (--text-encoder, fine-tuned?): ``minilm+ft`` fine-tunes MiniLM."""
    return (label[: -len("+ft")], True) if label.endswith("+ft") else (label, False)


def compare_encoders(args, codes: np.ndarray, names: list[str]) -> None:
    """Train the text→emoji model with each ``--encoders`` text side on the seeded splits (the
    same splits for every encoder; TF-IDF + LR on each), and merge the rows into ``--encoders-out``
    so the encoders can be run one job at a time. A frozen encoder encodes all the tweets once
    (timed apart: "encode s"); the train seconds are per split."""
    from siamese.emoji.text_encoders import BILSTM, load_text_encoder

    tweets = read_tweets()
    glove = data_root() / "glove" / "glove-50d-5k.json"
    results = json.loads(args.encoders_out.read_text()) if args.encoders_out.is_file() else {}
    for label in args.encoders:
        spec, fine_tune = encoder_spec(label)
        vectors, encode_seconds = None, 0.0
        if spec != BILSTM and not fine_tune:
            encoder = load_text_encoder(spec)
            unique = sorted(set(tweets.texts))
            started = time.perf_counter()
            vectors = dict(zip(unique, encoder.encode(unique)))
            encode_seconds = time.perf_counter() - started
        epochs = args.ft_epochs if fine_tune else args.sqam_epochs
        # Splits already measured with the same settings are kept (an encoder can be run a split at a time).
        earlier = results.get(label, {})
        same = earlier.get("epochs") == epochs and earlier.get("encoder_lr", args.encoder_lr) == args.encoder_lr
        splits = dict(earlier.get("splits", {})) if same else {}
        for seed in args.split_seeds:
            _, report = train_and_evaluate(
                tweets,
                codes=codes,
                names=names,
                model_config=TextEmojiConfig(sentiment_aware=True, fine_tune=fine_tune),
                config=TextEmojiTrainConfig(epochs=epochs, seed=seed, encoder_lr=args.encoder_lr),
                glove_path=glove,
                text_encoder=spec,
                text_vectors=vectors,
                progress=fine_tune,
            )  # fine-tuning: per-epoch lines on stderr
            test = report["test"]
            splits[str(seed)] = {
                "accuracy": test["accuracy"],
                "recall": test["recall"],
                "confusion_matrix": test["confusion_matrix"],
                "agree_at_5": test["sentiment_agreement_at_5"],
                "val_accuracy": report["val_accuracy"],
                "train_seconds": report["seconds"],
                "temperature": report["calibration"]["temperature"],
                "calibration": test.get("calibration"),
                "tfidf_logreg": report["baselines"]["tfidf_logreg"]["accuracy"],
                "majority": report["baselines"]["majority"]["accuracy"],
            }
            print(f"{label} split {seed}: {json.dumps(splits[str(seed)])}", flush=True)
        splits = dict(sorted(splits.items()))
        results[label] = {
            "spec": spec,
            "fine_tuned": fine_tune,
            "epochs": epochs,
            "encode_seconds_12000": encode_seconds or earlier.get("encode_seconds_12000", 0.0),
            **({"encoder_lr": args.encoder_lr} if fine_tune else {}),
            "splits": splits,
        }
        args.encoders_out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(args.encoders_out) as tmp:
            tmp.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print_encoder_table(results)


def print_encoder_table(results: dict) -> None:
    """Markdown: test accuracy per split and mean, TF-IDF + LR on the same splits, validation
    accuracy, top-5 agreement, encode and train seconds."""
    seeds = sorted({seed for row in results.values() for seed in row["splits"]}, key=int)

    def cells(splits: dict, key: str) -> str:
        values = [splits[s][key] if s in splits else None for s in seeds]
        known = [v for v in values if v is not None]
        return " | ".join("–" if v is None else f"{v:.3f}" for v in values) + f" | **{np.mean(known):.3f}**"

    print(
        "| text side | " + " | ".join(f"split {s}" for s in seeds) + " | mean | TF-IDF + LR (same splits) | "
        "val acc. | top-5 agree | encode s (12,000 tweets) | train s / split |"
    )
    print("|---|" + "---:|" * (len(seeds) + 6))
    baselines = {}
    for label, row in results.items():
        splits = row["splits"]
        baselines |= splits

        def mean(key: str, splits: dict = splits) -> float:
            return np.mean([s[key] for s in splits.values()])

        print(
            f"| {label} | {cells(splits, 'accuracy')} | {mean('tfidf_logreg'):.3f} | {mean('val_accuracy'):.3f} | "
            f"{mean('agree_at_5'):.3f} | {row['encode_seconds_12000']:.0f} | {mean('train_seconds'):.0f} |"
        )
    for baseline in ("tfidf_logreg", "majority"):
        print(f"| {baseline} | {cells(baselines, baseline)} | – | – | – | – | – |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--encoders",
        nargs="+",
        help="Only compare these text sides (bilstm, minilm, mpnet, student:DIR, "
        "minilm+ft = fine-tuned) on --split-seeds (needs --vae); merges rows into --encoders-out.",
    )
    p.add_argument("--split-seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--ft-epochs", type=int, default=2, help="Epochs of a fine-tuned (+ft) text side.")
    p.add_argument("--encoder-lr", type=float, default=2e-5, help="Learning rate of a fine-tuned encoder.")
    p.add_argument("--encoders-out", type=Path, default=HERE / "results" / "emoji-encoders.json")
    p.add_argument("--table", action="store_true", help="Only print the markdown table of --encoders-out.")
    p.add_argument("--vae", type=Path, help="Reuse this trained VAE folder.")
    p.add_argument("--vae-epochs", type=int, default=15)
    p.add_argument("--sqam-epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--more-seeds",
        type=int,
        nargs="*",
        default=[1, 2],
        help="Also train and test both text→emoji models with these seeds (each draws its own split): the mean.",
    )
    p.add_argument("--work", type=Path, default=Path("runs/emoji"), help="Where models and full-size sheets go.")
    p.add_argument("--out", type=Path, default=HERE / "results" / "emoji.json")
    args = p.parse_args()

    if args.table:
        print_encoder_table(json.loads(args.encoders_out.read_text()))
        return
    emojis = load_emojis()
    if args.encoders:
        if not args.vae:
            p.error("--encoders needs --vae")
        compare_encoders(args, EmojiVAE.load(args.vae).encode(emojis.images), emojis.names)
        return
    if args.vae:
        vae = EmojiVAE.load(args.vae)
    else:
        vae = train_vae(
            emojis,
            model_config=VAEConfig(),
            config=VAETrainConfig(epochs=args.vae_epochs, seed=args.seed),
            progress=False,
        )
        vae.save(args.work / "vae")
    started = time.perf_counter()
    codes = vae.encode(emojis.images)
    encode_seconds = time.perf_counter() - started
    training = vae.info["training"]
    vae_summary = {
        "config": vae.info.get("training", {}).get("config"),
        "architecture": vars(vae.config),
        "history": training["history"],
        "best_epoch": training["best_epoch"],
        "val_loss": training["val_loss"],
        "seconds_per_epoch": training["seconds_per_epoch"],
        "non_finite_codes": int((~np.isfinite(codes)).any(axis=1).sum()),
        "encode_seconds_all_874": encode_seconds,
    }

    sheets = write_sheets(vae, args.work / "sheets", between=("1f389", "1f621"), seed=args.seed)
    for sheet in sheets:
        if sheet.name in ("grid_A.png", "samples.png", "reconstructions.png", "interpolation.png"):
            small_png(sheet, DOCS / f"emoji-{sheet.name}")

    tweets = read_tweets()
    glove = data_root() / "glove" / "glove-50d-5k.json"
    models, reports = {}, {}
    for name, aware in (("pixels-only", False), ("sentiment-aware", True)):
        model, report = train_and_evaluate(
            tweets,
            codes=codes,
            names=emojis.names,
            model_config=TextEmojiConfig(sentiment_aware=aware),
            config=TextEmojiTrainConfig(epochs=args.sqam_epochs, seed=args.seed),
            glove_path=glove,
        )
        model.save(args.work / f"sqam-{name}")
        models[name], reports[name] = model, report

    seeds = {}
    for seed in [args.seed, *args.more_seeds]:
        for name, aware in (("pixels-only", False), ("sentiment-aware", True)):
            if seed == args.seed:
                report = reports[name]
            else:
                _, report = train_and_evaluate(
                    tweets,
                    codes=codes,
                    names=emojis.names,
                    model_config=TextEmojiConfig(sentiment_aware=aware),
                    config=TextEmojiTrainConfig(epochs=args.sqam_epochs, seed=seed),
                    glove_path=glove,
                )
            row = seeds.setdefault(seed, {})
            row[name] = {
                "accuracy": report["test"]["accuracy"],
                "agree_at_5": report["test"]["sentiment_agreement_at_5"],
            }
            row |= {b: report["baselines"][b]["accuracy"] for b in ("tfidf_logreg", "majority")}
    means = {name: float(np.mean([row[name]["accuracy"] for row in seeds.values()])) for name in reports}
    means |= {b: float(np.mean([row[b] for row in seeds.values()])) for b in ("tfidf_logreg", "majority")}

    examples = []
    for i, text in enumerate(EXAMPLES):
        row = {"text": text}
        for name, model in models.items():
            top = model.suggest(text, k=5)
            row[name] = [{"name": n, "char": name_to_char(n), "score": round(s, 4)} for n, s in top]
            answers = model.scores([text])[0][model.network.answers.numpy()]
            row[f"{name} answers"] = dict(zip(("🎉", "😈", "😡"), map(float, answers.round(4))))
            if i in (0, 2):
                strip = args.work / f"suggest-{name}-{i + 1}.png"
                save_strip(
                    emojis.images[[emojis.find(n) for n, _ in top]],
                    [f"{n}\n{s:.3f}" for n, s in top],
                    strip,
                    title=f"{name}: {text[:70]}…",
                )
                small_png(strip, DOCS / f"emoji-suggest-{name}-{i + 1}.png")
        examples.append(row)

    summary = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "vae": vae_summary,
        "sqam": reports,
        "seeds": seeds,
        "mean_accuracy": means,
        "examples": examples,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")

    print(
        f"VAE: best val loss {vae_summary['val_loss']:.1f} (epoch {vae_summary['best_epoch']}), "
        f"{vae_summary['seconds_per_epoch']:.1f} s/epoch, "
        f"inf/NaN codes {vae_summary['non_finite_codes']} of {len(emojis)}"
    )
    print("| model | test accuracy | recall pos / neu / neg | top-5 share the tweet's sentiment |")
    print("|---|---|---|---|")
    first = next(iter(reports.values()))
    for name, r in [(n, r["test"]) for n, r in reports.items()] + [
        (b, first["baselines"][b]) for b in ("majority", "tfidf_logreg")
    ]:
        recall = " / ".join(f"{v:.3f}" for v in r["recall"].values())
        print(f"| {name} | {r['accuracy']:.4f} | {recall} | {r.get('sentiment_agreement_at_5', float('nan')):.3f} |")
    print("per seed:", json.dumps(seeds))
    print("mean accuracy over seeds:", {k: round(v, 4) for k, v in means.items()})
    for row in examples:
        print(f"\n{row['text'][:80]}…")
        for name in models:
            print(f"  {name}: {' '.join(s['char'] for s in row[name])}")


if __name__ == "__main__":
    main()
