"""The labelling loop against random labels and against no labels, on shared labelled sets.

For each set, a pool of train-split pairs plays the corpus (``siamese label --pairs``) and the
set's labels play the person (the oracle replay). With all-MiniLM-L6-v2 as it is (no training):

* ``none``: the model's generic threshold (chosen by ``siamese pretrained`` on msrp-val, sts-dev
  and sick-trial), the cosine clipped to [0, 1] read as the probability;
* ``loop``: the first B answers the loop asks for (siamese.label: the selection, the threshold
  where the fitted chance of a duplicate is 1/2, the calibrator ``siamese calibrate`` fits);
* ``random``: B pool pairs drawn at random, the same threshold and calibrator fitted on them;
  ``random_cut``: the accuracy-maximising cut on those random answers (siamese.evaluation.metrics);

each scored on the set's test split: accuracy at the threshold and ECE (10 bins) of the
probabilities, beside the accuracy of the best threshold on the test split itself (``oracle``,
the ceiling, never used to choose anything), and of the threshold fitted on every pool pair's
label (``all_pool``: what labels of the train split can give at most). Loop and random are
averaged over ``--seeds``.
Pools and test splits are capped at ``--cap`` pairs (a fixed random subset) so that encoding
stays within a few minutes on a CPU; each text is encoded once.

    .venv/bin/python bench/label.py [--budgets 25 50 100 200] [--seeds 5] [--cap 2000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from siamese import datasets
from siamese.data.pairs import split_pairs
from siamese.decision.calibration import expected_calibration_error
from siamese.evaluation.metrics import choose_threshold
from siamese.label import stats
from siamese.label.selection import Selector, pair_candidates
from siamese.models.sentence_encoder import from_pretrained

HERE = Path(__file__).resolve().parent
# name -> (pool, test): a train split and a test split (MQP has none: a fixed stratified half each;
# SemEval's shared files hold train and dev: dev is its test here)
SETS = {
    "mqp": ("mqp", None),
    "semeval-cqa": ("semeval-train", "semeval-dev"),
    "twitter-url": ("twitter-url-train", "twitter-url-test"),
    "msrp": ("msrp-train", "msrp-test"),
    "paws-qqp": ("paws-qqp-train", "paws-qqp-dev-test"),
    "sick": ("sick-train", "sick-test"),  # relatedness >= 4 is a duplicate, as the reader binarises it
}


def capped(pairs, cap: int, seed: int = 0):
    if len(pairs) <= cap:
        return pairs
    return pairs.subset(np.sort(np.random.default_rng(seed).choice(len(pairs), cap, replace=False)))


def load(name: str, cap: int):
    pool_name, test_name = SETS[name]
    pool = datasets.load(pool_name)
    if test_name is None:
        pool, test = split_pairs(pool, [0.5], seed=0)
    else:
        test = datasets.load(test_name)
    return capped(pool, cap), capped(test, cap)


def similarity(model, pairs) -> np.ndarray:
    """Each distinct text encoded once (the vectors are unit length: a dot product is the cosine)."""
    texts = sorted(set(pairs.text1) | set(pairs.text2))
    at = {t: i for i, t in enumerate(texts)}
    vectors = model.encode(texts)
    a = vectors[[at[t] for t in pairs.text1]]
    b = vectors[[at[t] for t in pairs.text2]]
    return np.einsum("ij,ij->i", a, b).astype(np.float64)


def asked(strategy: str, sims: np.ndarray, labels: np.ndarray, budget: int, seed: int) -> list[int]:
    """The pool pairs the loop (or random draws) asks about, in order, as siamese.label.session does."""
    candidates = pair_candidates([""] * len(sims), [""] * len(sims), sims, range(len(sims)))
    candidates.texts = [f"{side}{i}" for side in "ab" for i in range(len(sims))]  # every text distinct
    selector = Selector(candidates, strategy=strategy, seed=seed)
    done: list[int] = []
    unavailable = np.zeros(len(sims), bool)
    while len(done) < min(budget, len(sims)):
        t, width = stats.threshold(sims[done], labels[done])
        n = selector.choose(done, unavailable, t, width)
        done.append(n)
        unavailable[n] = True
    return done


def scored(sims, labels, pool, test_sims, test_labels, cut: bool = False) -> dict:
    """Accuracy at the threshold fitted on (sims, labels) and ECE of their calibrator, on the test pairs."""
    calibrator = stats.fitted_calibrator(sims, labels)  # None: fewer than 2 answers of a label
    if cut:
        t = choose_threshold(sims, labels)[0]
    elif calibrator is not None:
        t = stats.most_accurate(calibrator, pool)  # as the page's statistics choose it
    else:
        t = stats.threshold(sims, labels)[0]
    if t is None:
        return {"accuracy": None, "ece": None}
    accuracy = float(np.mean((test_sims > t) == (test_labels == 1)))
    ece = expected_calibration_error(calibrator(test_sims), test_labels) if calibrator is not None else None
    return {"accuracy": accuracy, "ece": ece, "threshold": t}


def mean(runs: list[dict], key: str):
    values = [r[key] for r in runs if r[key] is not None]
    return round(float(np.mean(values)), 4) if values else None


def bench_set(model, name: str, budgets: list[int], seeds: int, cap: int, cache: Path | None = None) -> dict:
    started = time.perf_counter()
    pool, test = load(name, cap)
    labels, test_labels = pool.labels.astype(np.int64), test.labels.astype(np.int64)
    file = cache / f"{name}-{cap}.npz" if cache else None
    if file is not None and file.is_file():  # similarities kept from an earlier run (--cache)
        kept = np.load(file)
        sims, test_sims = kept["pool"], kept["test"]
    else:
        sims, test_sims = similarity(model(), pool), similarity(model(), test)
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            np.savez(file, pool=sims, test=test_sims)
    oracle_t, found = choose_threshold(test_sims, test_labels)
    generic = model().threshold
    none_acc = float(np.mean((test_sims > generic) == (test_labels == 1)))
    out = {
        "pool": len(pool),
        "test": len(test),
        "test_duplicates": round(float(test_labels.mean()), 3),
        "oracle": {"accuracy": round(found["value"], 4), "threshold": round(oracle_t, 4)},
        "none": {
            "accuracy": round(none_acc, 4),
            "ece": round(expected_calibration_error(np.clip(test_sims, 0, 1), test_labels), 4),
            "threshold": round(generic, 4),
        },
        # every pool pair labelled: the most any threshold chosen on the train split can give
        "all_pool": scored(sims, labels, sims, test_sims, test_labels),
        "budgets": {},
    }
    out["all_pool"] = {k: round(v, 4) for k, v in out["all_pool"].items() if v is not None}
    runs = {s: [asked(s, sims, labels, max(budgets), seed) for seed in range(seeds)] for s in ("active", "random")}
    for budget in budgets:
        row = {}
        for label, strategy, cut in (
            ("loop", "active", False),
            ("random", "random", False),
            ("random_cut", "random", True),
        ):
            found = [
                scored(sims[r[:budget]], labels[r[:budget]], sims, test_sims, test_labels, cut) for r in runs[strategy]
            ]
            row[label] = {"accuracy": mean(found, "accuracy"), "ece": mean(found, "ece")}
        out["budgets"][str(budget)] = row
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def goals(results: dict) -> dict:
    sets = list(results)
    within = [
        s for s in sets if results[s]["budgets"]["50"]["loop"]["accuracy"] >= results[s]["oracle"]["accuracy"] - 0.01
    ]
    gain = np.mean(
        [
            results[s]["budgets"]["50"]["loop"]["accuracy"] - results[s]["budgets"]["50"]["random"]["accuracy"]
            for s in sets
        ]
    )
    eces = {s: results[s]["budgets"]["100"]["loop"]["ece"] for s in sets}
    return {
        "loop50_within_1pt_of_oracle": f"{len(within)} of {len(sets)}: {', '.join(within)}",
        "loop50_minus_random50_mean_points": round(100 * float(gain), 2),
        "loop100_ece": eces,
        "loop100_ece_at_most_0.05": sum(e is not None and e <= 0.05 for e in eces.values()),
    }


def table(report: dict) -> str:
    """The results as a Markdown table: accuracy (ECE) per set, by budget."""
    budgets = list(next(iter(report["sets"].values()))["budgets"])
    head = "| set | oracle | all pool | none | " + " | ".join(f"loop {b} | random {b}" for b in budgets) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]

    def cell(r):
        return (
            f"{100 * r['accuracy']:.1f} ({r['ece']:.3f})" if r["accuracy"] is not None and r["ece"] is not None else "–"
        )

    for name, r in report["sets"].items():
        row = [
            name,
            f"{100 * r['oracle']['accuracy']:.1f}",
            cell(r["all_pool"]) if "ece" in r["all_pool"] else "–",
            cell(r["none"]),
        ]
        row += [cell(r["budgets"][b][k]) for b in budgets for k in ("loop", "random")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    ap.add_argument("--budgets", nargs="+", type=int, default=[25, 50, 100, 200])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cap", type=int, default=2000, help="pairs per pool and per test split at most")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "label.json")
    ap.add_argument("--cache", type=Path, help="keep each set's similarities here (outside the repository) for reruns")
    args = ap.parse_args()
    built = []

    def model():  # built on first use: a rerun from --cache needs only the generic threshold
        if not built:
            built.append(from_pretrained(args.model, datasets.validation_sets()))
        return built[0]

    results = {}
    for name in args.sets:
        results[name] = bench_set(model, name, args.budgets, args.seeds, args.cap, args.cache)
        print(name, json.dumps(results[name]), flush=True)
    report = {
        "model": args.model,
        "generic_threshold": round(model().threshold, 4),
        "seeds": args.seeds,
        "cap": args.cap,
        "sets": results,
    }
    if {"25", "50", "100"} <= set(map(str, args.budgets)) or {50, 100} <= set(args.budgets):
        report["goals"] = goals(results)
        print(json.dumps(report["goals"], indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
