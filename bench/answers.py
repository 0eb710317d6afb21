"""Answer selection (SQAM) on TrecQA and WikiQA: MAP and MRR on the test splits.

Each recipe trains on (question, right answer, wrong answer) triplets of the train split with
its loss (hinge by default), validates on the dev split's triplets, and ranks every test
question's candidates. References: TF-IDF cosine (fitted on the train texts) and
all-MiniLM-L6-v2 as-is.

    .venv/bin/python bench/answers.py                          # everything, both sets
    .venv/bin/python bench/answers.py --sets trecqa --recipes cnn-glove-hinge --no-docs

Writes bench/results/answers.json and, unless --no-docs, the table into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from zoo import GLOVE, write_docs

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.data.answers import load_answers, make_triplets, ranking_report
from siamese.evaluation.baselines import TfidfBaseline

HERE = Path(__file__).resolve().parent
RECIPES = {
    "cnn-glove-hinge": (
        dict(encoder="cnn", loss="hinge", encoder_options={"filters": 300}),
        dict(epochs=8, batch_size=64),
        True,
    ),
    "bilstm-max-glove-hinge": (
        dict(encoder="bilstm-max", loss="hinge", encoder_options={"hidden": 128, "out_dim": 128}),
        dict(epochs=8, batch_size=64),
        True,
    ),
    "bilstm-glove-hinge": (
        dict(encoder="bilstm", loss="hinge", encoder_options={"hidden": 128, "pooling": "max"}),
        dict(epochs=6, batch_size=64),
        True,
    ),
    "minilm-as-is": (dict(encoder="transformer"), None, False),
    "minilm-hinge-2e-5": (dict(encoder="transformer", loss="hinge"), dict(epochs=1, batch_size=16, lr=2e-5), False),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", nargs="*", default=["trecqa", "wikiqa"])
    p.add_argument("--recipes", nargs="*", default=["tfidf", *RECIPES])
    p.add_argument("--negatives", type=int, default=5, help="Wrong answers per right answer in the training triplets.")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-docs", action="store_true")
    p.add_argument("--out", type=Path, default=HERE / "results" / "answers.json")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    root = datasets.data_root()
    rows = []
    for name in args.sets:
        train_q, dev_q, test_q = (load_answers(f"{name}-{split}", root) for split in ("train", "dev", "test"))
        triplets = make_triplets(train_q, negatives=args.negatives, seed=args.seed, source=f"{name}-train")
        val = make_triplets(dev_q, negatives=args.negatives, seed=args.seed, source=f"{name}-dev")
        for recipe in args.recipes:
            t0 = time.perf_counter()
            if recipe == "tfidf":
                scorer = (
                    TfidfBaseline()
                    .fit([q.text for q in train_q] + [a for q in train_q for a in q.answers])
                    .similarity_pairwise
                )
            else:
                model_kwargs, train_kwargs, glove = RECIPES[recipe]
                config = ModelConfig(**model_kwargs, glove=str(root / GLOVE) if glove else None, seed=args.seed)
                if train_kwargs is None:
                    model = SiameseModel.build([], config)
                else:
                    model = train(
                        triplets,
                        val,
                        model_config=config,
                        config=TrainConfig(**train_kwargs, seed=args.seed),
                        progress=False,
                    )
                scorer = model.similarity_pairwise
            report = ranking_report(scorer, test_q)
            rows.append(
                {
                    "set": name,
                    "recipe": recipe,
                    "seconds": round(time.perf_counter() - t0, 1),
                    "triplets": len(triplets),
                    **report,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(
                json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2) + "\n"
            )
    sets = list(dict.fromkeys(r["set"] for r in rows))
    lines = [
        "| recipe | " + " | ".join(f"{s} MAP · MRR" for s in sets) + " | seconds |",
        "|---|" + "---|" * len(sets) + "---:|",
    ]
    for recipe in dict.fromkeys(r["recipe"] for r in rows):
        cells = {r["set"]: r for r in rows if r["recipe"] == recipe}
        lines.append(
            f"| {recipe} | "
            + " | ".join(f"{cells[s]['map']:.3f} · {cells[s]['mrr']:.3f}" if s in cells else "–" for s in sets)
            + f" | {sum(c['seconds'] for c in cells.values()):.0f} |"
        )
    markdown = "\n".join(lines)
    print(markdown)
    if not args.no_docs:
        write_docs(
            markdown,
            "HF_HUB_OFFLINE=1 .venv/bin/python bench/answers.py",
            "answers",
            "Answer selection (TrecQA, WikiQA)",
        )


if __name__ == "__main__":
    main()
