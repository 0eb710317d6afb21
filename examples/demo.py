"""`make demo`: the main job in a few minutes, on real data, with nothing trained.

1. all-MiniLM-L6-v2 (the minilm extra) as a Siamese model; its duplicate threshold is
   chosen on the shared validation sets (msrp-val, sts-dev, sick-trial) to maximise F1;
2. it judges held-out duplicate pairs (Quora sample, Medical Question Pairs, STS-B test)
   and the seed's two example pairs;
3. it de-duplicates 3,000 real InsuranceQA questions into clusters (each member a paraphrase of
   its cluster's kept question);
4. where to go next: train on your pairs, the fast student, serve.

Data: $SIAMESE_DATA (default ../shared/data). Writes runs/demo-model (the model, usable by every
command) and runs/demo-dedupe (the dedupe run). Runs on a GPU when there is one.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from siamese import datasets
from siamese.data.pairs import Pairs, read_texts
from siamese.errors import SiameseError
from siamese.evaluation.metrics import choose_threshold, classification_report

EXAMPLES = [
    ("When will I see you?", "When can I see you again?"),  # duplicate
    ("Do they enjoy eating the dessert?", "Do they like hiking in the desert?"),  # not
]
HELD_OUT = ["quora-sample", "mqp", "sts-test"]  # none of them chooses the threshold
CORPUS_SIZE = 3000
MODEL_OUT, DEDUPE_OUT = "runs/demo-model", "runs/demo-dedupe"


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def pair_scores(model, pairs: Pairs) -> np.ndarray:
    """The model's similarity of each pair, both sides encoded in one call (with a progress bar)."""
    import torch

    vectors = torch.from_numpy(model.encode(pairs.text1 + pairs.text2, progress=True))
    return model.score(vectors[: len(pairs)], vectors[len(pairs) :])


def load_model(root):
    from siamese.models.sentence_encoder import from_pretrained

    step("all-MiniLM-L6-v2 as a Siamese model (pretrained, used as it is)")
    model = from_pretrained("minilm").to("auto")
    print(f"loaded on {model.device}; {model.dim}-d unit vectors, cosine similarity")
    val = Pairs.concat([datasets.load(name, root) for name in datasets.VALIDATION])
    print(f"choosing the duplicate threshold on {len(val):,} validation pairs ({', '.join(datasets.VALIDATION)}):")
    threshold, found = choose_threshold(pair_scores(model, val), val.labels, "f1")
    model.set_threshold(threshold)
    model.info["pretrained"]["threshold_choice"] = {
        "threshold": threshold,
        "chosen_on": datasets.VALIDATION,
        "val_pairs": len(val),
        **found,
    }
    print(f"threshold {threshold:.3f} (the best F1 there, {found['value']:.3f}): above it, a pair is a duplicate")
    return model


def judge_held_out(model, root) -> None:
    step("judging held-out duplicate pairs (never seen by the threshold choice)")
    rows = []
    for name in HELD_OUT:
        pairs = datasets.load(name, root)
        print(f"{name}: {len(pairs):,} pairs", flush=True)
        rows.append((name, len(pairs), classification_report(pair_scores(model, pairs), pairs.labels, model.threshold)))
    print(f"\n{'held-out set':<14}{'pairs':>7}{'ROC-AUC':>9}{'accuracy':>10}{'precision':>11}{'recall':>8}{'F1':>7}")
    for name, n, r in rows:
        print(
            f"{name:<14}{n:>7,}{r['roc_auc']:>9.3f}{r['accuracy']:>10.3f}{r['precision']:>11.3f}"
            f"{r['recall']:>8.3f}{r['f1']:>7.3f}"
        )
    print("(ROC-AUC: how well the similarity ranks duplicates above the rest; the others at the threshold)")

    step("the seed's examples")
    sims = model.similarity_pairwise([a for a, _ in EXAMPLES], [b for _, b in EXAMPLES])
    for (a, b), s in zip(EXAMPLES, sims):
        verdict = "duplicate" if s > model.threshold else "not duplicate"
        print(f"  {a!r} / {b!r}: similarity {s:.3f} → {verdict}")


def dedupe_corpus(model, root) -> None:
    from siamese.search import dedupe

    texts = read_texts(root / "insuranceqa" / "questions.csv", "question")[:CORPUS_SIZE]
    step(f"de-duplicating {len(texts):,} InsuranceQA questions")
    run = dedupe(model, texts, DEDUPE_OUT, progress=True)
    clusters = run.clusters()
    removed = sum(c.size - 1 for c in clusters)
    print(
        f"{len(clusters)} clusters at cosine > {run.threshold:.3f} (the dedupe default: strict, as a false merge "
        f"loses a question): {len(texts) - removed:,} questions kept, {removed:,} ({removed / len(texts):.0%}) "
        f"flagged as paraphrases of a kept one; biggest cluster {max((c.size for c in clusters), default=0)}"
    )
    for c in clusters[:12:3]:  # a few, of different sizes
        print(f"\n  kept: {c.kept.text}")
        for d in c.duplicates[:4]:
            print(f"    {d.similarity:.3f}  {d.record.text}")
        if len(c.duplicates) > 4:
            print(f"    ... and {len(c.duplicates) - 4} more")


NEXT = f"""
== where to go next
  siamese predict {MODEL_OUT} "How do I learn Python?" "What is the best way to learn Python?"
  siamese dedupe {MODEL_OUT} --data questions.txt --out runs/my-dedupe    # your own texts; --explain
  siamese dedupe {DEDUPE_OUT} --rethreshold 0.95 --explain                 # stricter, without re-encoding
  siamese train --data my_pairs.csv --from minilm --out runs/mine          # learn your pairs' "duplicate"
  siamese distill --out runs/student           # the fast static student (~100x faster than MiniLM; minutes)
  siamese serve {MODEL_OUT}                     # HTTP: /similarity, /search, /embed, /docs
Guides: docs/guides/ (duplicates, dedupe, search, serving, training, student); examples/*.py."""


def main() -> int:
    root = datasets.data_root()
    if not datasets.available(root):
        print(f"error: no shared data at {root}; set SIAMESE_DATA to the folder holding the data sets", file=sys.stderr)
        return 2
    started = time.perf_counter()
    print(f"data: {root}")
    model = load_model(root)
    judge_held_out(model, root)
    model.save(MODEL_OUT, overwrite=False)
    dedupe_corpus(model, root)
    print(NEXT)
    print(f"\ndone in {time.perf_counter() - started:.0f}s; model saved to {MODEL_OUT}, dedupe run to {DEDUPE_OUT}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SiameseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
