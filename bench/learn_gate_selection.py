"""How ``siamese train --from`` decides between its fine-tune and the pretrained model as it is
(siamese.training.learn._decide), decided on the train side only. For each ``set:seed``, bench-learn's
200 labels; the fine-tune is trained and kept whatever the gate says, and both models are scored on up
to 1,500 pool pairs sharing no text with the labels (``rest_*``: what chose the rule) and on the test
split (``test_*``: reported, never used to choose): the pretrained model at the labels' threshold, the
fine-tune at its own. Each rule is then the accuracy of the model it would have kept.

    python bench/learn_gate_selection.py run msrp:0 twitter-url:0 ... > bench/results/learn-gate-selection.jsonl
    python bench/learn_gate_selection.py summary bench/results/learn-gate-selection.jsonl [--test]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# a rule: keep the fine-tune given the cross-validated numbers of the two (acc: a fitted threshold's
# accuracy; auc: ROC-AUC, mean over the same folds)
RULES = {
    "accuracy ahead (the rule of the last round)": lambda r: r["cv_acc_ft"] > r["cv_acc_asis"],
    "ROC-AUC ahead": lambda r: r["cv_auc_ft"] > r["cv_auc_asis"],
    "accuracy or ROC-AUC ahead": lambda r: r["cv_acc_ft"] > r["cv_acc_asis"] or r["cv_auc_ft"] > r["cv_auc_asis"],
    "accuracy ahead, or ROC-AUC by 0.01 (kept)": lambda r: (
        r["cv_acc_ft"] > r["cv_acc_asis"] or r["cv_auc_ft"] > r["cv_auc_asis"] + 0.01
    ),
    "accuracy not behind": lambda r: r["cv_acc_ft"] >= r["cv_acc_asis"],
    "always the fine-tune": lambda r: True,
    "never (as-is)": lambda r: False,
}


def run(specs: list[str]) -> None:
    import learn as bench  # bench/learn.py: the same sets, splits and labels

    import siamese.training.learn as recipe
    from siamese.decision.threshold import choose_threshold
    from siamese.models.sentence_encoder import load_bi_encoder

    decide, seen_cv = recipe._decide, {}

    def forced(cv, pretrained, y, options):  # record the gate's numbers, then keep the fine-tune
        decision = decide(cv, pretrained, y, options)
        seen_cv.update(decision["cross_validation"])
        if decision["chosen"] == "as-is":
            held = cv["held"][decision["epoch"]]
            decision.update(chosen="fine-tuned", threshold=choose_threshold(held, y[cv["rows"]], options.metric)[0])
        return decision

    recipe._decide = forced
    minilm = load_bi_encoder("minilm", device="cpu")
    for spec in specs:
        name, seed_text = spec.split(":")
        seed = int(seed_text)
        pool, test, _ = bench.load_set(name, 2000)
        rows = bench.labelled(pool, "200", seed)
        labels, rest = pool.subset(rows), bench.outside_labels(pool, rows)
        model = recipe.learn(labels, "minilm", options=recipe.LearnOptions(seed=seed, device="cpu"))
        asis_threshold = bench.best_cut(bench.cosines(minilm, labels), labels.labels)
        row = {
            "set": name,
            "seed": seed,
            "cv_acc_asis": seen_cv["as_is"]["accuracy"],
            "cv_acc_ft": seen_cv["fine_tuned"]["accuracy"],
            "cv_auc_asis": seen_cv["as_is"]["roc_auc"],
            "cv_auc_ft": seen_cv["fine_tuned"]["roc_auc"],
            "epoch": model.info["learned"]["epoch"],
            "rest_pairs": len(rest),
        }
        for side, pairs in (("rest", rest), ("test", test)):
            row[f"{side}_asis"] = bench.metrics(bench.cosines(minilm, pairs), pairs.labels, asis_threshold)["accuracy"]
            row[f"{side}_ft"] = bench.metrics(bench.cosines(model, pairs), pairs.labels, model.threshold)["accuracy"]
        print(json.dumps(row), flush=True)


def summary(path: str, side: str) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    asis = np.array([r[f"{side}_asis"] for r in rows])
    print(f"{len(rows)} runs; accuracy on the {side} pairs of the model each rule keeps")
    print("| rule | mean | worst against as-is | runs kept |")
    print("|---|---:|---:|---:|")
    for name, keep in RULES.items():
        kept = [keep(r) for r in rows]
        got = np.array([r[f"{side}_ft"] if k else r[f"{side}_asis"] for r, k in zip(rows, kept)])
        print(f"| {name} | {got.mean():.4f} | {100 * (got - asis).min():+.1f} | {sum(kept)} |")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2:])
    else:
        summary(sys.argv[2], "test" if "--test" in sys.argv else "rest")
