"""How a kept fine-tune's threshold is chosen, compared on the train side only: for each ``set:seed``,
``siamese train --from minilm`` on bench-learn's labels at ``--budget``, then the accuracy of several
threshold rules on up to 1,500 pool pairs sharing no text with the labels (``pool``: what may choose a
rule) and on the test split (``test``: reported, never used to choose). One JSON line per set and seed.

The rules, from what the recipe computes anyway (captured around siamese.training.learn's steps):

- ``oof``: the best cut of the held-out cosines (the fold models', or the held-out quarter's)
- ``own``: the best cut of the kept model's own cosines of the labels it was trained on
- ``mid``: their midpoint (the recipe's rule up to 600 labels; above, ``oof``)
- ``oof_platt`` / ``own_platt`` / ``mid_platt``: the same with ``fit_threshold``'s Platt cut
- ``shift``: ``oof`` moved by how much higher the kept model's own cosines sit than the fold models' own
  cosines of their training pairs (more steps on more labels push cosines apart)
- ``offset``: ``own`` corrected by the gap the fold models show between their held-out best cut and the
  best cut of their own training pairs
- ``oof_prior``: ``oof`` with the held-out pairs weighted so that their share of duplicates is the labels'
  (a held-out quarter of whole connected groups can hold far more or fewer duplicates than the labels)

    python bench/learn_threshold_rules.py --budget 200 mqp:0 sick:0 ... > bench/results/learn-threshold-rules-200.jsonl
    python bench/learn_threshold_rules.py --summary bench/results/learn-threshold-rules-200.jsonl
    python bench/learn_threshold_rules.py --summary FILE --against oof --min-pool 100   # points against a rule
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

RULES = ("oof", "own", "mid", "oof_platt", "own_platt", "mid_platt", "shift", "offset", "oof_prior")


SEEN: dict = {}


def capture() -> dict:
    """Wrap the recipe's steps (once) to keep what the rules need; returns the dict they fill for the next run."""
    import siamese.training.learn as recipe

    SEEN.clear()
    SEEN["fits"] = []
    if getattr(recipe.fine_tune, "captured", False):
        return SEEN
    seen = SEEN
    fine_tune, decide = recipe.fine_tune, recipe._decide

    def fine_tune_kept(tower, states, a, b, y, options, epochs, on_epoch=None, bar=None):
        fit = {"y": np.asarray(y), "own": {}}
        seen["fits"].append(fit)

        def after(top, epoch):
            fit["own"][epoch] = top.cosines(states, a, b)
            if on_epoch is not None:
                on_epoch(top, epoch)

        return fine_tune(tower, states, a, b, y, options, epochs, after, bar)

    def decide_kept(cv, pretrained, y, options):
        decision = decide(cv, pretrained, y, options)
        seen.update(cv=cv, y=np.asarray(y), decision=dict(decision))
        return decision

    fine_tune_kept.captured = True  # type: ignore[attr-defined]
    recipe.fine_tune, recipe._decide = fine_tune_kept, decide_kept
    return seen


def rules(seen: dict) -> dict[str, float]:
    """Every rule's threshold for the kept fine-tune."""
    from siamese.decision.threshold import choose_threshold, fit_threshold

    cv, y, epoch = seen["cv"], seen["y"], seen["decision"]["epoch"]
    rows = cv["rows"]
    held, yh = cv["held"][epoch], y[rows]
    fits = seen["fits"]
    if "folds" in cv:  # K folds: fits[:K] are the fold models, the last the final model on every label
        folds_fit, final = fits[: len(cv["folds"])], fits[-1]
    else:  # one quarter held out: the model trained on the rest is the one kept
        folds_fit, final = fits[:1], fits[0]
    own_scores = final["own"][epoch]

    def best(s, t):
        return choose_threshold(s, t)[0]

    def platt(s, t):
        return fit_threshold(s, t)[0]

    out = {
        "oof": best(held, yh),
        "own": best(own_scores, final["y"]),
        "oof_platt": platt(held, yh),
        "own_platt": platt(own_scores, final["y"]),
    }
    out["oof_prior"] = weighted_cut(held, yh, float(y.mean()))
    out["mid"] = (out["oof"] + out["own"]) / 2
    out["mid_platt"] = (out["oof_platt"] + out["own_platt"]) / 2
    fold_mean = np.mean([f["own"][epoch].mean() for f in folds_fit])
    out["shift"] = out["oof"] + float(own_scores.mean() - fold_mean)
    fold_own_cut = np.mean([best(f["own"][epoch], f["y"]) for f in folds_fit])
    out["offset"] = out["own"] + float(out["oof"] - fold_own_cut)
    return out


def weighted_cut(scores: np.ndarray, truth: np.ndarray, share: float) -> float:
    """The most accurate cut of ``scores`` when duplicates are weighted to make up ``share`` of the pairs."""
    truth = np.asarray(truth).astype(bool)
    w = np.where(truth, share / max(truth.mean(), 1e-9), (1 - share) / max(1 - truth.mean(), 1e-9))
    order = np.argsort(-scores, kind="stable")
    s, t, ww = scores[order], truth[order], w[order]
    gained = np.concatenate([[0.0], np.cumsum(np.where(t, ww, -ww))])  # accuracy gain of calling the top k duplicates
    k = np.concatenate([[0], np.flatnonzero(np.diff(s) != 0) + 1, [len(s)]])
    kb = int(k[int(np.argmax(gained[k]))])
    upper = s[kb - 1] if kb > 0 else max(s[0], 1.0) + 1e-6
    lower = s[kb] if kb < len(s) else min(s[-1], -1.0) - 1e-6
    return float((upper + lower) / 2)


def run(spec: str, budget: str) -> dict:
    import learn as bench  # bench/learn.py: the same sets, splits and labels

    from siamese.training.learn import LearnOptions, learn

    name, seed, labels, rest, test = bench.train_side(spec, budget)
    seen = capture()
    model = learn(labels, "minilm", options=LearnOptions(seed=seed, device="cpu"))
    info = model.info["learned"]
    row: dict = {"set": name, "seed": seed, "labels": len(labels), "rest": len(rest), "chosen": info["chosen"]}
    row["kept_threshold"] = model.threshold
    held_rows = seen["cv"]["rows"]
    y = seen["y"]
    row["duplicates_share"] = {"labels": round(float(y.mean()), 3), "held_out": round(float(y[held_rows].mean()), 3)}
    if info["chosen"] != "fine-tuned":
        return row
    thresholds = rules(seen)
    pool_cos, test_cos = bench.cosines(model, rest), bench.cosines(model, test)
    row["thresholds"] = {k: round(v, 4) for k, v in thresholds.items()}
    for where, scores, truth in (("pool", pool_cos, rest.labels), ("test", test_cos, test.labels)):
        row[where] = {k: round(bench.metrics(scores, truth, t)["accuracy"], 4) for k, t in thresholds.items()}
        row[where]["ceiling"] = round(bench.metrics(scores, truth, bench.best_cut(scores, truth))["accuracy"], 4)
    return row


def summary(path: str, where: str, against: str | None = None, min_pool: int = 0) -> None:
    lines = [json.loads(x) for x in open(path) if x.strip()]
    kept = [r for r in lines if where in r and (where != "pool" or r["rest"] >= min_pool)]
    base = against or "the recipe"
    print(f"{len(kept)} fine-tunes kept of {len(lines)} runs; accuracy on {where}, mean (points against {base}):")

    def kept_rule(r: dict) -> str:  # the rule whose threshold is the one kept (the recipe's changed above 600 labels)
        return against or min(r["thresholds"], key=lambda k: abs(r["thresholds"][k] - r["kept_threshold"]))

    recipe = [kept_rule(r) for r in kept]
    for rule in (*[k for k in RULES if all(k in r[where] for r in kept)], "ceiling"):
        values = np.array([r[where][rule] for r in kept])
        diffs = values - np.array([r[where][k] for r, k in zip(kept, recipe)])
        print(f"  {rule:10s} {values.mean():.4f}  ({diffs.mean() * 100:+.2f}, worst {diffs.min() * 100:+.2f})")
    sets = sorted({r["set"] for r in kept})
    print("  per set:", ", ".join(f"{s} {len([r for r in kept if r['set'] == s])}" for s in sets))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="200")
    ap.add_argument("--summary", help="a JSON-lines file of this script's: print the means")
    ap.add_argument("--where", default="pool", choices=["pool", "test"])
    ap.add_argument("--against", choices=RULES, help="--summary: points against this rule (default: the one kept)")
    ap.add_argument("--min-pool", type=int, default=0, help="--summary: only runs with this many pool pairs or more")
    ap.add_argument("specs", nargs="*", metavar="SET:SEED")
    args = ap.parse_args()
    if args.summary:
        summary(args.summary, args.where, args.against, args.min_pool)
        return
    for spec in args.specs:
        print(json.dumps(run(spec, args.budget)), flush=True)


if __name__ == "__main__":
    main()
