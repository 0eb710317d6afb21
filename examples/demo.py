"""`make demo`: distil all-MiniLM-L6-v2 into a static student (the fast and accurate model for
finding duplicates: ~30x MiniLM's speed, most of its quality), evaluate it on held-out pairs
beside TF-IDF, and score the seed's two example pairs.

Data: the public sets in $SIAMESE_DATA (default ../shared/data): their texts outside the test
splits teach the student, their validation pairs choose the threshold. The model is saved to
runs/demo-model; try `siamese predict runs/demo-model "..." "..."` or `siamese dedupe runs/demo-model
--data questions.txt --out runs/clusters` afterwards. `siamese train` trains the seed's Siamese
LSTM and the other recipes (README).
"""

from __future__ import annotations

import sys
import time

from siamese import SiameseModel, datasets
from siamese.baselines import TfidfBaseline
from siamese.distill import distill
from siamese.errors import SiameseError
from siamese.evaluation import benchmark, choose_threshold

EXAMPLES = [
    ("When will I see you?", "When can I see you again?"),
    ("Do they enjoy eating the dessert?", "Do they like hiking in the desert?"),
]


def main() -> int:
    root = datasets.data_root()
    if not datasets.available(root):
        print(f"error: no shared data at {root}; set SIAMESE_DATA to the folder holding the data sets", file=sys.stderr)
        return 2
    started = time.perf_counter()
    train_pairs = datasets.load_many(datasets.TRAIN, root)
    val_pairs = datasets.load_many(datasets.VALIDATION, root)
    print(f"data: {root}")
    print(
        "distilling all-MiniLM-L6-v2 into a static student on the shared sets' texts (no test split); "
        f"threshold chosen on {len(val_pairs)} validation pairs"
    )
    model = distill("minilm", val_pairs=[datasets.load(n, root) for n in datasets.VALIDATION])
    info = model.info["distillation"]
    print(
        f"distilled in {info['seconds']:.0f}s ({info['teacher_seconds']:.0f}s of it the teacher) on "
        f"{info['corpus_texts']:,} texts; {info['tokens']:,} tokens x {model.dim}; threshold {model.threshold:.3f}"
    )
    model.save("runs/demo-model")
    model = SiameseModel.load("runs/demo-model")  # what users get back from disk

    tfidf = TfidfBaseline().fit(train_pairs.text1 + train_pairs.text2)
    ours = benchmark(model.similarity, datasets.BENCHMARKS, default_threshold=model.threshold, root=root)
    tfidf_threshold, _ = choose_threshold(tfidf.similarity(val_pairs.text1, val_pairs.text2), val_pairs.labels)
    base = benchmark(tfidf.similarity, datasets.BENCHMARKS, default_threshold=tfidf_threshold, root=root)
    print(
        f"\n{'held-out set':<16}{'pairs':>7}{'ROC-AUC':>9}{'acc':>7}{'F1':>7}{'Spearman':>10}   TF-IDF: ROC-AUC acc F1"
    )
    for name, r in ours.items():
        b = base[name]
        rho = f"{r['spearman']:.1f}" if "spearman" in r else "-"
        print(
            f"{name:<16}{r['n']:>7}{r['roc_auc']:>9.3f}{r['accuracy']:>7.3f}{r['f1']:>7.3f}{rho:>10}"
            f"   {b['roc_auc']:.3f} {b['accuracy']:.3f} {b['f1']:.3f}"
        )
    (tn, fp), (fn, tp) = ours["quora-sample"]["confusion_matrix"]
    print(f"Quora sample confusion matrix [[tn, fp], [fn, tp]] = [[{tn}, {fp}], [{fn}, {tp}]]")

    print("\nthe seed's examples:")
    sims = model.similarity([a for a, _ in EXAMPLES], [b for _, b in EXAMPLES])
    for (a, b), s in zip(EXAMPLES, sims):
        verdict = "duplicate" if s > model.threshold else "not duplicate"
        print(f"  {a!r} / {b!r}: similarity {s:.3f} → {verdict}")
    print(f"\ndone in {time.perf_counter() - started:.0f}s; model saved to runs/demo-model")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SiameseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
