"""Learning curves from labels (``make bench-learn``): does ``siamese train --from minilm`` beat
all-MiniLM-L6-v2 as it is, and sentence-transformers' own fine-tuning recipe, on the same labels?

Sets and splits (grouped: no text of a test pair is in the pool, so nothing is memorised):

* MQP (no split) and SICK (its official train and test share most sentences): all pairs split by
  connected groups of the pair graph (texts are nodes, pairs edges; siamese.data.groups), groups
  shuffled (seed 0) and dealt to the test side until it holds half of the pairs;
* SemEval-2016 CQA B (train / dev as test), Twitter-URL, MSRP, PAWS-QQP: the official splits, the
  train pairs that share a text with the test split dropped.

The test split is capped at ``--test-cap`` pairs (default 2,000), the pool at 4,000 (fixed random
subsets, seed 0). Labels at budget B and seed s: the first B pairs of the pool in the order of
permutation 1000 + s (nested budgets); ``all`` = every pair of the pool (up to 4,000).

Contenders, scored on the test split (accuracy, F1, ROC-AUC; seconds and peak memory of training,
each training in a fresh process; peak memory with and without scoring the test split):

* ``oracle``: MiniLM as it is, the accuracy-maximising threshold on the test split itself (the
  ceiling of any threshold; never used to choose anything);
* ``threshold``: MiniLM as it is, its threshold fitted on the labels as ``siamese train --from`` fits one
  when it keeps the model as it is (``fit_threshold``: where a Platt fit crosses 1/2, guarded; before
  2026-11-28 the accuracy-maximising cut, as results files from before then say);
* ``learn``: ``siamese train --data LABELS --from minilm`` (siamese.training.learn): the top layers
  fine-tuned, epochs by grouped cross-validation on the labels, kept only if it beats as-is;
* ``st``: sentence-transformers' own recipe on the same labels, as its quora_duplicate_questions
  example: all-MiniLM-L6-v2, OnlineContrastiveLoss (cosine distance, margin 0.5), batch 64,
  10 epochs, AdamW 2e-5 (no decay on biases and LayerNorm), 10% linear warm-up then linear decay,
  gradients clipped at 1; the threshold is the accuracy-maximising cut on the labels' cosines
  after training. Under bf16 autocast where the CPU has native bf16 (as ``learn`` runs).
* ``cross``: ``siamese train --cross --prior minilm`` on the labels: a cross-encoder (both texts read
  together) on MiniLM's weights correcting MiniLM's cosine, 4 epochs, a grouped quarter of the labels
  held out for its best epoch and threshold.
* ``cascade``: ``learn``'s model proposes and ``cross``'s decides the test pairs in the band where the
  two disagree, as ``siamese score LEARNED --verify CROSS`` does (``--verify-band auto``: the narrowest
  band that agrees with the cross-encoder on 99 % of its duplicates, from a sample of the pairs); both
  trained on the labels in one process (its seconds are both trainings'). No ROC-AUC: its verdicts
  come from two scores.
* ``cascade-labels``: the same, but both models trained on three quarters of the labels (a grouped
  split) and the band chosen on the quarter neither saw (``--verify-band QUARTER.csv``:
  :func:`siamese.decision.cascade.labelled_band`, 0 wide where the cross-encoder does not help).

    python bench/learn.py [--sets mqp msrp] [--budgets 50 200 all] [--seeds 5] [--first-seed 0]
                          [--contenders threshold learn st cross cascade cascade-labels] [--out ...]
    python bench/learn.py --labels my_labels.csv [--budgets 50 100 200 all] [--seeds 3]
    python bench/learn.py --merge seeds-0.json seeds-1-2.json --out learn.json   # runs of several files, one table

``--labels FILE``: the learning curve of your own labels instead (grouped test split of
``--test-share`` of them, the rest the pool): "does training help on my data?".

``--base mpnet``: all-mpnet-base-v2 in MiniLM's place for *oracle*, *threshold*, *learn* (``train --from
mpnet``) and *st*; MiniLM's own oracle is recorded beside it (``oracle_minilm``), since the goals are read
against both.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
SETS = {
    "mqp": (["mqp"], None),
    "semeval-cqa": (["semeval-train"], ["semeval-dev"]),
    "twitter-url": (["twitter-url-train"], ["twitter-url-test"]),
    "msrp": (["msrp-train"], ["msrp-test"]),
    "paws-qqp": (["paws-qqp-train"], ["paws-qqp-dev-test"]),
    "sick": (["sick-train", "sick-trial", "sick-test"], None),
}
BUDGETS = ["50", "100", "200", "500", "1000", "all"]
CONTENDERS = ["threshold", "learn", "st", "cross", "cascade", "cascade-labels"]
POOL_CAP = 4000


# -- the protocol ------------------------------------------------------------------------------------------------


def capped(pairs, cap: int, seed: int = 0):
    if len(pairs) <= cap:
        return pairs
    return pairs.subset(np.sort(np.random.default_rng(seed).choice(len(pairs), cap, replace=False)))


def load_set(name: str, test_cap: int):
    """(pool, test, info) of a named set."""
    from siamese.data import datasets
    from siamese.data.groups import grouped_split
    from siamese.data.pairs import Pairs

    pool_names, test_names = SETS[name]
    pool = Pairs.concat([datasets.load(n) for n in pool_names])
    info = {}
    if test_names is None:
        test, pool = grouped_split(pool, 0.5, seed=0)
        info["split"] = "connected groups of all pairs, half to test (seed 0)"
    else:
        test = Pairs.concat([datasets.load(n) for n in test_names])
        seen = set(test.text1) | set(test.text2)
        keep = np.array([a not in seen and b not in seen for a, b in zip(pool.text1, pool.text2)])
        info["split"] = "official; train pairs sharing a text with the test split dropped"
        info["dropped"] = int((~keep).sum())
        pool = pool.subset(np.flatnonzero(keep))
    pool, test = capped(pool, POOL_CAP), capped(test, test_cap)
    info.update(pool=len(pool), test=len(test), test_duplicates=round(float(np.mean(test.labels)), 3))
    return pool, test, info


def load_labels(path: str, share: float, test_cap: int):
    """A user's labels as (pool, test, info): a grouped test split of ``share`` of them."""
    from siamese.data.groups import grouped_split
    from siamese.data.pairs import read_pairs

    test, pool = grouped_split(read_pairs(path), share, seed=0)
    test = capped(test, test_cap)
    return pool, test, {"split": f"connected groups, {share:.0%} to test", "pool": len(pool), "test": len(test)}


def labelled(pool, budget: str, seed: int) -> np.ndarray:
    """Pool rows labelled at this budget and seed (nested over budgets)."""
    order = np.random.default_rng(1000 + seed).permutation(len(pool))
    return order if budget == "all" else order[: int(budget)]


def outside_labels(pool, rows: np.ndarray, cap: int = 1500):
    """Up to ``cap`` pool pairs sharing no text with the labelled ``rows``: unseen pairs of the train
    side, on which the recipe's choices are made (never on the test split)."""
    texts = set(pool.text1[r] for r in rows) | set(pool.text2[r] for r in rows)
    outside = [i for i in range(len(pool)) if pool.text1[i] not in texts and pool.text2[i] not in texts]
    return pool.subset(np.array(outside[:cap], dtype=np.int64))


def consistent(pool, rows: np.ndarray) -> np.ndarray:
    """``rows`` less the pairs whose two texts are labelled both ways among them (SICK holds one such
    pair, which the recipe rightly refuses; at small budgets both copies are hardly ever drawn)."""
    from siamese.training.learn import answered_both_ways

    both = set(answered_both_ways(pool.subset(rows)))
    keep = [r for r in rows if tuple(sorted((pool.text1[r], pool.text2[r]))) not in both]  # keys: (smaller, larger)
    return np.array(keep, dtype=rows.dtype)


def train_side(spec: str, budget: str):
    """``SET:SEED`` → (set, seed, its labels at ``budget``, the pool pairs outside them, the test split): what the
    train-side selection scripts (bench/learn_*_rules.py, learn_recipe_selection.py) choose on and report."""
    name, seed_text = spec.split(":")
    seed = int(seed_text)
    pool, test, _ = load_set(name, 2000)
    rows = consistent(pool, labelled(pool, budget, seed))
    return name, seed, pool.subset(rows), outside_labels(pool, rows), test


# -- scoring -----------------------------------------------------------------------------------------------------


def cosines(model, pairs) -> np.ndarray:
    """Each distinct text encoded once; unit vectors, so a dot product is the cosine."""
    texts = sorted(set(pairs.text1) | set(pairs.text2))
    at = {t: i for i, t in enumerate(texts)}
    v = model.encode(texts)
    return np.einsum("ij,ij->i", v[[at[t] for t in pairs.text1]], v[[at[t] for t in pairs.text2]]).astype(float)


def metrics(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict:
    from sklearn.metrics import f1_score, roc_auc_score

    y = np.asarray(labels).astype(int)
    p = (scores > threshold).astype(int)
    return {
        "accuracy": float((p == y).mean()),
        "f1": float(f1_score(y, p, zero_division=0)),
        "roc_auc": float(roc_auc_score(y, scores)) if len(set(y.tolist())) == 2 else None,
    }


def best_cut(scores, labels) -> float:
    from siamese.decision.threshold import choose_threshold

    return choose_threshold(scores, labels, "accuracy")[0]


def fitted_cut(scores, labels) -> float:
    from siamese.decision.threshold import fit_threshold

    return fit_threshold(scores, labels, "accuracy")[0]


# -- contenders that train: each in a fresh process (clean seconds and peak memory) ------------------------------


def _child(kind: str, labels, test, seed: int, base: str, queue) -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    try:
        queue.put(_train_and_score(kind, labels, test, seed, base))
    except Exception as e:  # noqa: BLE001 (recorded; a child that dies without a word would hang the parent)
        queue.put({"error": f"{type(e).__name__}: {e}"})


def _train_and_score(kind: str, labels, test, seed: int, base: str = "minilm") -> dict:
    started, cpu = time.perf_counter(), time.process_time()
    if kind == "cascade-labels":
        from siamese.data.groups import grouped_split
        from siamese.decision.cascade import labelled_band
        from siamese.training.learn import LearnOptions, learn

        held, rest = grouped_split(labels, 0.25, seed=seed)
        model = learn(rest, "minilm", options=LearnOptions(seed=seed, device="cpu"))
        verifier = cross_recipe(rest, seed)[0]
        band = labelled_band(model, verifier, held)
        return _cascade(model, verifier, test, started, cpu, band=band.half_width)
    if kind in ("learn", "cascade"):
        from siamese.training.learn import LearnOptions, learn

        model = learn(labels, base, options=LearnOptions(seed=seed, device="cpu"))
        info = model.info["learned"]
        threshold = model.threshold
        extra = {k: info[k] for k in ("chosen", "epoch", "cross_validation") if k in info}
        if kind == "cascade":
            return _cascade(model, cross_recipe(labels, seed)[0], test, started, cpu)
    elif kind == "cross":
        model, threshold = cross_recipe(labels, seed)
        extra = {"epoch": model.info["training"].get("best_epoch")}
    else:
        model, threshold = st_recipe(labels, seed, base=base)
        extra = {}
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    train_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # training's alone
    scores = model.similarity_pairwise(list(test.text1), list(test.text2)) if kind == "cross" else cosines(model, test)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # scoring the test split too
    measured = {"seconds": seconds, "cpu_s": cpu_s, "train_peak_mb": train_peak, "peak_mb": peak}
    return {**metrics(scores, test.labels, threshold), **measured, **extra}


def _cascade(model, verifier, test, started: float, cpu: float, band="auto") -> dict:
    """The test pairs decided as ``siamese score MODEL --verify VERIFIER --verify-band BAND`` decides them."""
    from sklearn.metrics import f1_score

    from siamese.decision.cascade import verify_pairs

    train_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    done = verify_pairs(model, verifier, list(test.text1), list(test.text2), band=band)
    y, p = np.asarray(test.labels).astype(int), done.duplicate.astype(int)
    return {
        "accuracy": float((p == y).mean()),
        "f1": float(f1_score(y, p, zero_division=0)),
        "roc_auc": None,
        "learn_accuracy": float((done.first_stage.astype(int) == y).mean()),
        "verified": float(done.verified.mean()),
        "band": done.band.as_json(),
        "seconds": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "train_peak_mb": train_peak,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def trained(kind: str, labels, test, seed: int, base: str = "minilm") -> dict:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(kind, labels, test, seed, base, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def cross_recipe(labels, seed: int, *, epochs: int = 4):
    """``siamese train --cross`` on the labels: a cross-encoder on MiniLM's weights correcting MiniLM's
    cosine (``--prior minilm``), a grouped quarter of the labels held out for its best epoch and
    threshold; (model, threshold)."""
    from siamese.config.configs import TrainConfig
    from siamese.cross.model import CrossConfig
    from siamese.cross.train import train_cross
    from siamese.data.groups import grouped_split

    val, train = grouped_split(labels, 0.25, seed=seed)
    config = TrainConfig(epochs=epochs, seed=seed, device="cpu")
    model = train_cross(train, val, model_config=CrossConfig(prior="minilm"), config=config, progress=False)
    return model, model.threshold


def st_recipe(labels, seed: int, *, epochs: int = 10, batch: int = 64, lr: float = 2e-5, base: str = "minilm"):
    """sentence-transformers' OnlineContrastiveLoss recipe on the labels; (model, threshold)."""
    import contextlib

    import torch
    from sentence_transformers import SentenceTransformer, losses

    from siamese.models.pretrained import model_folder
    from siamese.runtime.precision import native_bf16

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    a, b, y = labels.text1, labels.text2, np.asarray(labels.labels, int)
    model = SentenceTransformer(str(model_folder(base)), device="cpu")
    loss = losses.OnlineContrastiveLoss(model, margin=0.5)
    named = list(model.named_parameters())
    plain = [p for n, p in named if "bias" in n or "LayerNorm" in n]
    decayed = [p for n, p in named if not ("bias" in n or "LayerNorm" in n)]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.01}, {"params": plain, "weight_decay": 0.0}], lr=lr)
    steps = epochs * math.ceil(len(y) / batch)
    warm = math.ceil(0.1 * steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, warm) if s < warm else max(0.0, (steps - s) / max(1, steps - warm))
    )
    cast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if native_bf16() else contextlib.nullcontext
    model.train()
    for _ in range(epochs):
        perm = rng.permutation(len(y))
        for s in range(0, len(y), batch):
            r = perm[s : s + batch]
            f1, f2 = model.tokenize([a[i] for i in r]), model.tokenize([b[i] for i in r])
            with cast():
                value = loss([f1, f2], torch.tensor(y[r], dtype=torch.float32))
            opt.zero_grad(set_to_none=True)
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            schedule.step()
    model.eval()

    class Encoder:  # encode() as siamese's: unit vectors
        def encode(self, texts):
            with torch.no_grad(), cast():
                return model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)

    encoder = Encoder()
    return encoder, best_cut(cosines(encoder, labels), y)


# -- the grid ----------------------------------------------------------------------------------------------------


def run_set(name: str, pool, test, info: dict, budgets, seeds: range, contenders, base: str = "minilm") -> dict:
    from siamese.models.sentence_encoder import from_pretrained

    encoder = from_pretrained(base)
    drawn = {(b, s): consistent(pool, labelled(pool, b, s)) for b in budgets for s in seeds}
    scored = np.unique(np.concatenate(list(drawn.values()))) if "threshold" in contenders else np.zeros(0, np.int64)
    pool_cos = np.full(len(pool), np.nan)  # only the labelled pairs are read (a larger encoder is slow)
    if len(scored):
        pool_cos[scored] = cosines(encoder, pool.subset(scored))
    test_cos = cosines(encoder, test)
    out = {"info": info, "base": base, "oracle": metrics(test_cos, test.labels, best_cut(test_cos, test.labels))}
    if base != "minilm":  # the goals are read against MiniLM's own oracle too
        minilm_cos = cosines(from_pretrained("minilm"), test)
        out["oracle_minilm"] = metrics(minilm_cos, test.labels, best_cut(minilm_cos, test.labels))
    out["budgets"] = {}
    del encoder
    print(f"{name}: {info} oracle {out['oracle']['accuracy']:.4f}", flush=True)
    for budget in budgets:
        runs = []
        for seed in seeds:
            rows = drawn[budget, seed]
            labels = pool.subset(rows)
            if len(set(labels.labels.tolist())) < 2:
                continue
            row = {"seed": seed, "labels": len(rows)}
            if "threshold" in contenders:
                row["threshold"] = metrics(test_cos, test.labels, fitted_cut(pool_cos[rows], labels.labels))
            for kind in ("learn", "cross", "cascade", "cascade-labels", "st"):
                if kind in contenders:
                    try:
                        row[kind] = trained(kind, labels, test, seed, base)
                    except Exception as e:  # noqa: BLE001 (e.g. too few labels for the recipe: recorded)
                        row[kind] = {"error": str(e)}
            runs.append(row)
            print(name, budget, seed, _line(row), flush=True)
        out["budgets"][budget] = {"runs": runs, "mean": _means(runs)}
    return out


def _line(row: dict) -> str:
    return " ".join(
        f"{k} {v['accuracy']:.4f}" + (f" ({v['seconds']:.0f}s {v['peak_mb']:.0f}MB)" if "seconds" in v else "")
        for k, v in row.items()
        if isinstance(v, dict) and "accuracy" in v
    )


def _means(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k, v in r.items() if isinstance(v, dict) and "accuracy" in v})
    means = {}
    for k in keys:
        done = [r[k] for r in runs if "accuracy" in r.get(k, {})]
        means[k] = {
            m: float(np.mean([d[m] for d in done]))
            for m in ("accuracy", "f1", "roc_auc", "verified", "seconds", "train_peak_mb", "peak_mb")
            if all(d.get(m) is not None for d in done)
        }
        means[k]["runs"] = len(done)
    return means


def table(results: dict) -> str:
    """Markdown: per set and budget, mean test accuracy (ROC-AUC) of each contender."""
    names = ["oracle", "threshold", "learn", "st", "cross", "cascade", "cascade-labels"]
    lines = ["| set | labels | " + " | ".join(names) + " | learn s / MB |", "|---|---|" + "---|" * (len(names) + 1)]
    for name, r in results.items():
        for budget, b in r["budgets"].items():
            cells = []
            for c in names:
                m = r["oracle"] if c == "oracle" else b["mean"].get(c)
                auc = f" ({m['roc_auc']:.3f})" if m and m.get("roc_auc") is not None else ""
                cells.append(f"{m['accuracy']:.3f}{auc}" if m and "accuracy" in m else "")
            if "oracle_minilm" in r:  # another base: MiniLM's own oracle beside it
                cells[0] += f" [MiniLM {r['oracle_minilm']['accuracy']:.3f}]"
            learn = b["mean"].get("learn", {})
            cost = f"{learn['seconds']:.0f} / {learn['peak_mb']:.0f}" if "seconds" in learn else ""
            lines.append(f"| {name} | {budget} | " + " | ".join(cells) + f" | {cost} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    ap.add_argument("--labels", help="your own labelled pairs instead of the six sets")
    ap.add_argument("--test-share", type=float, default=0.3, help="with --labels: the grouped test split's share")
    ap.add_argument("--budgets", nargs="+", default=BUDGETS)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--merge", nargs="+", type=Path, help="combine the runs of earlier --out files into --out")
    ap.add_argument("--contenders", nargs="+", default=CONTENDERS, choices=CONTENDERS)
    ap.add_argument("--test-cap", type=int, default=2000)
    ap.add_argument(
        "--base", default="minilm", choices=["minilm", "mpnet"], help="the encoder of oracle, threshold, learn, st"
    )
    ap.add_argument("--out", type=Path, default=HERE / "results" / "learn.json")
    args = ap.parse_args()
    if args.base != "minilm" and set(args.contenders) & {"cross", "cascade", "cascade-labels"}:
        ap.error("--base mpnet runs threshold, learn and st only (the cross-encoder recipe starts from MiniLM)")
    os.environ.setdefault("SIAMESE_DATA", str(HERE.parent.parent / "shared" / "data"))
    started = time.perf_counter()
    if args.merge:
        write(args.out, merged([json.loads(f.read_text()) for f in args.merge]), 0.0)
        return
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = {}
    if args.labels:
        pool, test, info = load_labels(args.labels, args.test_share, args.test_cap)
        results[Path(args.labels).name] = run_set(
            args.labels, pool, test, info, args.budgets, seeds, args.contenders, args.base
        )
    for name in [] if args.labels else args.sets:
        pool, test, info = load_set(name, args.test_cap)
        results[name] = run_set(name, pool, test, info, args.budgets, seeds, args.contenders, args.base)
    write(args.out, results, time.perf_counter() - started)


def merged(records: list[dict]) -> dict:
    """The runs of several result files, per set and budget (one run per seed: a later file's wins), means anew."""
    results: dict = {}
    for record in records:
        for name, r in record["sets"].items():
            into = results.setdefault(name, {**{k: v for k, v in r.items() if k != "budgets"}, "budgets": {}})
            for budget, b in r["budgets"].items():
                runs = {run["seed"]: run for run in into["budgets"].get(budget, {}).get("runs", [])}
                for run in b["runs"]:
                    runs[run["seed"]] = {**runs.get(run["seed"], {}), **run}
                ordered = [runs[k] for k in sorted(runs)]
                into["budgets"][budget] = {"runs": ordered, "mean": _means(ordered)}
    return results


def write(out: Path, results: dict, seconds: float) -> None:
    md = table(results)
    print(md)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"seconds": round(seconds, 1), "cpus": os.cpu_count(), "sets": results}
    out.write_text(json.dumps(record, indent=1) + "\n")
    out.with_suffix(".md").write_text(md + "\n")


if __name__ == "__main__":
    main()
