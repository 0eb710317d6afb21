"""How should ``siamese train --from`` choose its number of epochs at 200 labels? Rules compared on the
train side only: for each ``set:seed``, bench-learn's labels at ``--budget`` (three grouped folds, as the
recipe runs them there), and up to 1,500 pool pairs sharing no text with the labels to score on, never
the test split.

One run of the recipe's own pieces per set and seed gives every rule's result: the fold models' held-out
cosines at each epoch (as ``learn`` computes them), and the final model trained once for the recipe's 4
epochs with its cosines taken after each (training E epochs of the 4-epoch schedule is the first E epochs
of that run: same seed, same batches). Each rule picks an epoch from the held-out numbers; the gate
(fine-tune or MiniLM as it is: on that epoch, as the recipe has it, or on any epoch) and the threshold then
follow ``learn``'s rules for that epoch. One JSON line per set and seed:

    python bench/learn_epoch_rules.py mqp:0 sick:3 ... > bench/results/learn-epoch-rules-200.jsonl
    python bench/learn_epoch_rules.py --summary bench/results/learn-epoch-rules-200.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# rule name → the epoch it picks from the per-epoch fold ROC-AUC and fold accuracy (dicts epoch → value)


def _best(auc: dict, among=None) -> int:
    """The best mean fold ROC-AUC, fewer epochs on a tie (the recipe's rule), among ``among`` epochs."""
    return max(among or auc, key=lambda e: (round(auc[e], 6), -e))


def _last_within(auc: dict, margin: float) -> int:
    return max(e for e in auc if auc[e] >= max(auc.values()) - margin)


RULES = {
    "best ROC-AUC, fewer on a tie (the recipe)": lambda auc, acc: _best(auc),
    "always the last": lambda auc, acc: max(auc),
    "the last within 0.005 ROC-AUC of the best": lambda auc, acc: _last_within(auc, 0.005),
    "the last within 0.01 ROC-AUC of the best": lambda auc, acc: _last_within(auc, 0.01),
    "at least 2, then best ROC-AUC": lambda auc, acc: _best(auc, [e for e in auc if e >= 2]),
    "best fold accuracy, then ROC-AUC": lambda auc, acc: max(auc, key=lambda e: (round(acc[e], 6), auc[e], -e)),
}


def run(spec: str, budget: str) -> dict:
    import learn as bench  # bench/learn.py: the same sets, splits and labels
    import torch

    from siamese.data.groups import pair_groups
    from siamese.decision.threshold import choose_threshold, fit_threshold
    from siamese.models.sentence_encoder import load_bi_encoder
    from siamese.runtime.precision import resolve_precision
    from siamese.training import learn as L

    name, seed, labels, rest, _ = bench.train_side(spec, budget)
    options = L.LearnOptions(seed=seed, device="cpu")
    assert len(labels.labels) <= L.HOLDOUT_ABOVE, "the rules compared are for the K-fold plan"
    model = load_bi_encoder("minilm", device="cpu")
    tower = L._Tower(model, options.frozen_layers, torch.device("cpu"), resolve_precision("auto", torch.device("cpu")))
    texts = sorted(set(labels.text1) | set(labels.text2) | set(rest.text1) | set(rest.text2))
    at = {t: i for i, t in enumerate(texts)}
    a, b = np.array([at[t] for t in labels.text1]), np.array([at[t] for t in labels.text2])
    ra, rb = np.array([at[t] for t in rest.text1]), np.array([at[t] for t in rest.text2])
    y, ry = np.asarray(labels.labels, np.int64), np.asarray(rest.labels, np.int64)
    states, vectors = tower.states(model.vectorizer.encode(texts))
    pretrained = np.einsum("ij,ij->i", vectors[a], vectors[b]).astype(np.float64)
    pretrained_rest = np.einsum("ij,ij->i", vectors[ra], vectors[rb]).astype(np.float64)
    cv = L._cross_validate(tower, states, a, b, y, pair_groups(labels.text1, labels.text2), options, None)
    folds = cv["folds"]
    own, scored = {}, {}

    def keep(top, epoch):
        own[epoch] = top.cosines(states, a, b)
        scored[epoch] = top.cosines(states, ra, rb)

    L.fine_tune(tower, states, a, b, y, options, options.epochs, keep)
    auc = {e: L._fold_auc(cv["held"][e], y, folds) for e in cv["held"]}
    acc = {e: L.threshold_accuracy(cv["held"][e], y, folds, options.metric) for e in cv["held"]}
    as_is = {
        "accuracy": L.threshold_accuracy(pretrained, y, folds, options.metric),
        "roc_auc": L._fold_auc(pretrained, y, folds),
    }
    as_is_t, _ = fit_threshold(pretrained, y, options.metric)
    as_is_rest = float(((pretrained_rest > as_is_t) == (ry == 1)).mean())

    per_epoch = {}
    for e in cv["held"]:
        held_t, _ = choose_threshold(cv["held"][e], y, options.metric)
        own_t, _ = choose_threshold(own[e], y, options.metric)
        t = (held_t + own_t) / 2
        per_epoch[e] = {
            "fold_auc": round(auc[e], 4),
            "fold_accuracy": round(acc[e], 4),
            "rest_accuracy": round(float(((scored[e] > t) == (ry == 1)).mean()), 4),
            "rest_roc_auc": round(bench.metrics(scored[e], ry, t)["roc_auc"], 4),
        }
    out = {"set": name, "seed": seed, "labels": len(y), "rest": len(ry), "as_is_rest_accuracy": round(as_is_rest, 4)}
    out["per_epoch"] = per_epoch
    out["rules"] = {}
    # the gate as the recipe has it (the chosen epoch against as-is), or: keep a fine-tune if any epoch beats as-is
    beats = {e: acc[e] > as_is["accuracy"] or auc[e] > as_is["roc_auc"] + L.AUC_MARGIN for e in auc}
    for rule, pick in RULES.items():
        e = pick(auc, acc)
        for gate, kept in (("", beats[e]), (" | gate: any epoch", any(beats.values()))):
            out["rules"][rule + gate] = {
                "epoch": e,
                "kept": "fine-tuned" if kept else "as-is",
                "accuracy": per_epoch[e]["rest_accuracy"] if kept else round(as_is_rest, 4),
            }
    return out


def summary(path: Path) -> None:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    base = next(iter(RULES))
    print(f"{len(lines)} set-seeds; accuracy on pool pairs outside the labels, points against {base!r}")
    for rule in lines[0]["rules"]:
        d = [100 * (x["rules"][rule]["accuracy"] - x["rules"][base]["accuracy"]) for x in lines]
        mean = np.mean([x["rules"][rule]["accuracy"] for x in lines])
        print(
            f"  {rule}: mean {mean:.4f} ({np.mean(d):+.2f}; better {sum(v > 0 for v in d)}, "
            f"worse {sum(v < 0 for v in d)}, worst {min(d):+.1f}, best {max(d):+.1f})"
        )
    oracle = np.mean([max(p["rest_accuracy"] for p in x["per_epoch"].values()) for x in lines])
    print(f"  the best epoch on the scored pairs themselves (a ceiling, fine-tune forced): {oracle:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="200")
    ap.add_argument("--summary", type=Path)
    ap.add_argument("specs", nargs="*", metavar="SET:SEED")
    args = ap.parse_args()
    if args.summary:
        summary(args.summary)
        return
    for spec in args.specs:
        print(json.dumps(run(spec, args.budget)), flush=True)


if __name__ == "__main__":
    main()
