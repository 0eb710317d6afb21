"""De-duplication side by side with SemHash 0.5: the same corpus, every tool in its own process,
back to back; wall time (the whole process, model load included), peak memory (that process's
RSS), texts flagged, biggest cluster, and on labelled pairs planted in the corpus the recall of
duplicate pairs (both texts end in one cluster) and the false merges of non-duplicate pairs.

Corpus: bench/search.py's (every distinct text of the shared data), whitespace collapsed. Its
labelled pairs: MQP (duplicates and hard non-duplicates), InsuranceQA same-answer pairs, the Quora
sample, PAWS-QQP (train + dev/test: word-swap non-duplicates); pairs of equal texts left out.
Scaling: a fraction of the corpus keeps every labelled text and samples the rest.

Tools (each as its users call it):
  semhash-m2v     SemHash.from_records(texts, model=StaticModel) + self_deduplicate(0.9): a model2vec
                  distillation of all-MiniLM-L6-v2 made here (`distill`), not the tuned potion model
  semhash-minilm  the same with SentenceTransformer(all-MiniLM-L6-v2) as the encoder
  student         siamese dedupe runs/student (the static student)
  minilm          siamese dedupe runs/minilm (`siamese pretrained minilm`)
  cascade         siamese dedupe runs/student --verify runs/minilm (the student proposes, MiniLM decides)

Matched operating point: every tool re-thresholded to 10 % false merges on MQP (the lowest
threshold at or under it, by bisection), recall read on the other sets.

    .venv/bin/python bench/dedupe_peers.py distill [--load 2]     # siamese distill (and --epochs 0) vs model2vec's
        [--also "--corpus-sample 64000 --epochs 6"]               # another siamese distill beside them
    .venv/bin/python bench/dedupe_peers.py dedupe [--fractions 0.25 0.5 1]
    .venv/bin/python bench/dedupe_peers.py million                  # the cascade on 1M texts
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
WORK = HERE.parent / "runs" / "dedupe_peers"
PY = sys.executable
SETS = {
    "mqp": ["mqp"],
    "insuranceqa": ["insuranceqa-pairs"],
    "quora": ["quora-sample"],
    "paws-qqp": ["paws-qqp-train", "paws-qqp-dev-test"],
}
CALIBRATE = "mqp"
MATCHED_FALSE_MERGES = 0.10
TOOLS = ("semhash-m2v", "semhash-minilm", "student", "minilm", "cascade")


# -- the corpus and its labelled pairs ---------------------------------------------------------------


def normalise(text: str) -> str:
    return " ".join(text.split())


def corpus() -> list[str]:
    from search import corpus_texts

    return sorted({normalise(t) for t in corpus_texts()} - {""})


def labelled(texts: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """Each set's pairs as rows of ``texts``: {"positive": (n, 2), "negative": (m, 2)}."""
    from siamese import datasets

    where = {t: i for i, t in enumerate(texts)}
    out = {}
    for name, parts in SETS.items():
        pairs = datasets.load_many(parts)
        rows = [
            (where.get(normalise(a)), where.get(normalise(b)), y)
            for a, b, y in zip(pairs.text1, pairs.text2, pairs.labels)
        ]
        rows = [(a, b, y) for a, b, y in rows if a is not None and b is not None and a != b]
        out[name] = {
            kind: np.array([(a, b) for a, b, y in rows if bool(y) == (kind == "positive")], dtype=np.int64).reshape(
                -1, 2
            )
            for kind in ("positive", "negative")
        }
    return out


def subset(texts: list[str], truth: dict, fraction: float, seed: int = 0) -> np.ndarray:
    """Rows of ``texts`` in a fraction of the corpus: every labelled text, the rest sampled."""
    keep = np.zeros(len(texts), bool)
    for pairs in truth.values():
        for rows in pairs.values():
            keep[rows.ravel()] = True
    others = np.flatnonzero(~keep)
    want = max(int(round(fraction * len(texts))) - int(keep.sum()), 0)
    keep[np.random.default_rng(seed).choice(others, size=min(want, len(others)), replace=False)] = True
    return np.flatnonzero(keep)


def scores(labels: np.ndarray, truth: dict) -> dict:
    """Recall of the duplicate pairs and false merges of the non-duplicate pairs, per set (labels: cluster per text)."""
    out = {}
    for name, pairs in truth.items():
        row = {}
        for kind, key in (("positive", "recall"), ("negative", "false_merges")):
            p = pairs[kind]
            if len(p):
                row[key] = round(float(np.mean(labels[p[:, 0]] == labels[p[:, 1]])), 4)
                row[f"{kind}_pairs"] = len(p)
        out[name] = row
    return out


def clustering(labels: np.ndarray) -> dict:
    sizes = np.bincount(labels)
    return {"flagged": int(len(labels) - (sizes > 0).sum()), "biggest_cluster": int(sizes.max())}


def remap(truth: dict, rows: np.ndarray) -> dict:
    """The labelled pairs as rows of the subset ``rows`` (sorted rows of the corpus)."""
    return {n: {k: np.searchsorted(rows, v) for k, v in p.items()} for n, p in truth.items()}


# -- one tool in its own process -------------------------------------------------------------------------


def measured(cmd: list[str], *, env: dict | None = None, log: Path | None = None) -> dict:
    """Run ``cmd``; its wall time, peak RSS (from wait4) and CPU time, and the child's JSON last line."""
    started = time.perf_counter()
    env = {**{k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}, **(env or {})}  # each tool's defaults
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines, gaps = [], []

    def read_stderr():
        last = time.perf_counter()
        for line in proc.stderr:
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
            lines.append(f"{now - started:8.1f} {line.rstrip()}")

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if log is not None:
        log.write_text("\n".join(lines) + "\n")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n" + "\n".join(lines[-20:]))
    last = [line for line in stdout.splitlines() if line.startswith("{")]
    child = json.loads(last[-1]) if last else {}
    extra = child.pop("bench_only_seconds", 0.0)  # after the tool's own work: the bench's outputs
    return {
        "wall_seconds": round(wall - extra, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "max_stderr_gap_seconds": round(max(gaps, default=0.0), 1),
        "child": child,
    }


def semhash_child(args) -> None:
    """One SemHash de-duplication as its users write it; then (untimed) the labels for the bench."""
    started = time.perf_counter()
    texts = Path(args.texts).read_text(encoding="utf-8").split("\n")[:-1]
    model = semhash_model(args.model)
    from semhash import SemHash

    semhash = SemHash.from_records(records=texts, model=model)
    result = semhash.self_deduplicate(threshold=args.threshold)
    kept = result.selected
    work = time.perf_counter() - started
    where = {t: i for i, t in enumerate(texts)}
    labels = np.arange(len(texts))
    for d in result.filtered:
        labels[where[d.record]] = where[d.duplicate_of]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "labels.npy", labels)
    np.save(out / "vectors.npy", np.asarray(semhash.index.vectors, np.float32))
    print(
        json.dumps(
            {
                "kept": len(kept),
                "work_seconds": round(work, 1),
                "bench_only_seconds": round(time.perf_counter() - started - work, 1),
            }
        )
    )


def semhash_model(name: str):
    if name == "minilm":
        from sentence_transformers import SentenceTransformer

        from siamese.models.pretrained import model_folder

        return SentenceTransformer(str(model_folder("minilm")), device="cpu")
    from model2vec import StaticModel

    return StaticModel.from_pretrained(name)


def semhash_matched_child(args) -> None:
    """SemHash re-thresholded (its own self_deduplicate, on the vectors it made) to the false-merge target."""
    from semhash import SemHash

    texts = Path(args.texts).read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.load(Path(args.out) / "vectors.npy")
    negatives = np.load(args.negatives)
    semhash = SemHash.from_embeddings(vectors, texts, model=semhash_model(args.model))
    where = {t: i for i, t in enumerate(texts)}

    def labels_at(t: float) -> np.ndarray:
        labels = np.arange(len(texts))
        for d in semhash.self_deduplicate(threshold=t).filtered:
            labels[where[d.record]] = where[d.duplicate_of]
        return labels

    t, labels, steps = bisect(labels_at, negatives)
    np.save(Path(args.out) / "labels-matched.npy", labels)
    print(json.dumps({"threshold": t, "steps": steps}))


def bisect(labels_at, negatives: np.ndarray, lo: float = 0.5, hi: float = 0.999, steps: int = 9):
    """The lowest threshold whose false merges on ``negatives`` are at most the target (bisection)."""
    best = None
    trace = []
    for _ in range(steps):
        mid = round((lo + hi) / 2, 5)
        labels = labels_at(mid)
        fm = float(np.mean(labels[negatives[:, 0]] == labels[negatives[:, 1]]))
        trace.append({"threshold": mid, "false_merges": round(fm, 4)})
        if fm <= MATCHED_FALSE_MERGES:
            best, hi = (mid, labels), mid
        else:
            lo = mid
    if best is None:
        best = (hi, labels_at(hi))
    return best[0], best[1], trace


# -- siamese runs --------------------------------------------------------------------------------------


def siamese_labels(run: Path, n: int) -> np.ndarray:
    labels = np.arange(n)
    with open(run / "clusters.jsonl", encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            for d in c["duplicates"]:
                labels[d["row"]] = c["row"]
    return labels


def siamese_matched(run: Path, negatives: np.ndarray, floor: float = 0.5) -> tuple[float, np.ndarray, list]:
    """A plain siamese run re-thresholded from its saved vectors: the dedupe's own pair search and
    greedy clusters, from a floor low enough for any threshold the bisection tries."""
    from siamese.search import clusters, duplicate_pairs

    vectors = np.load(run / "vectors.npy")
    with np.load(run / "pairs.npz") as z:
        text_of = z["text_of"]
    meta = json.loads((run / "run.json").read_text())
    pairs = duplicate_pairs(vectors, floor, k=meta["k"])

    def labels_at(t: float) -> np.ndarray:
        owner = np.arange(len(vectors))
        for group in clusters(len(vectors), pairs.above(t), "greedy"):
            owner[group] = group[0]
        return owner[text_of]

    return bisect(labels_at, negatives)


def siamese_cmd(model: Path, texts: Path, out: Path, *extra: str) -> list[str]:
    return [
        PY,
        "-m",
        "siamese",
        "dedupe",
        str(model),
        "--data",
        str(texts),
        "--out",
        str(out),
        "--json",
        "--quiet",
        *extra,
    ]


# -- the comparisons -----------------------------------------------------------------------------------


def run_tool(tool: str, args, texts_file: Path, out: Path, n: int) -> tuple[dict, np.ndarray]:
    log = out.with_suffix(".log")
    if tool.startswith("semhash"):
        model = "minilm" if tool == "semhash-minilm" else str(args.m2v)
        cmd = [PY, __file__, "semhash-child", "--texts", str(texts_file), "--out", str(out), "--model", model]
        got = measured(cmd, log=log)
        return got, np.load(out / "labels.npy")
    model = args.minilm if tool == "minilm" else args.student
    extra = ["--verify", str(args.minilm)] if tool == "cascade" else []
    shutil.rmtree(out, ignore_errors=True)  # the bench's own run folder of an earlier round
    got = measured(siamese_cmd(model, texts_file, out, *extra), log=log)
    return got, siamese_labels(out, n)


def dedupe(args) -> None:
    texts = corpus()
    truth = labelled(texts)
    WORK.mkdir(parents=True, exist_ok=True)
    result = {"corpus_texts": len(texts), "machine": machine(), "rows": [], "matched": {}}
    out_file = args.out
    for fraction in args.fractions:
        rows = subset(texts, truth, fraction)
        part = [texts[i] for i in rows]
        sub_truth = remap(truth, rows)
        texts_file = WORK / f"texts-{fraction:g}.txt"
        texts_file.write_text("".join(t + "\n" for t in part), encoding="utf-8")
        for tool in args.tools:
            out = WORK / f"{tool}-{fraction:g}"
            got, labels = run_tool(tool, args, texts_file, out, len(part))
            row = {
                "tool": tool,
                "fraction": fraction,
                "texts": len(part),
                "threshold": 0.9,
                **got,
                **clustering(labels),
                "sets": scores(labels, sub_truth),
            }
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            write(out_file, result)
        if fraction == max(args.fractions) and args.matched:
            result["matched"] = matched(args, part, texts_file, sub_truth)
            write(out_file, result)
    print(json.dumps(result["matched"], indent=1))


def matched(args, part: list[str], texts_file: Path, truth: dict) -> dict:
    negatives = truth[CALIBRATE]["negative"]
    neg_file = WORK / "negatives.npy"
    np.save(neg_file, negatives)
    out = {}
    for tool in args.tools:
        run = WORK / f"{tool}-{max(args.fractions):g}"
        if tool.startswith("semhash"):
            model = "minilm" if tool == "semhash-minilm" else str(args.m2v)
            child = measured(
                [
                    PY,
                    __file__,
                    "semhash-matched-child",
                    "--texts",
                    str(texts_file),
                    "--out",
                    str(run),
                    "--model",
                    model,
                    "--negatives",
                    str(neg_file),
                ]
            )["child"]
            t, labels, trace = child["threshold"], np.load(run / "labels-matched.npy"), child["steps"]
        elif tool == "cascade":
            continue  # below, at MiniLM's matched threshold
        else:
            t, labels, trace = siamese_matched(run, negatives)
        out[tool] = {"threshold": t, **clustering(labels), "sets": scores(labels, truth), "bisection": trace}
        print(json.dumps({tool: out[tool]["sets"]}), flush=True)
    if "cascade" in args.tools and "minilm" in out:
        t = out["minilm"]["threshold"]
        run = WORK / texts_file.stem.replace("texts", "cascade-matched")  # per fraction: cascade-matched-0.5
        shutil.rmtree(run, ignore_errors=True)
        measured(siamese_cmd(args.student, texts_file, run, "--verify", str(args.minilm), "--threshold", str(t)))
        labels = siamese_labels(run, len(part))
        out["cascade"] = {
            "threshold": t,
            "note": "run at MiniLM's matched threshold",
            **clustering(labels),
            "sets": scores(labels, truth),
        }
    return out


def million(args) -> None:
    """The cascade (and the student alone, and with --minilm MiniLM's own dedupe) on 1M texts: the
    corpus plus joins of two of its texts (bench/search.py's), k=10 as bench-search's dedupe."""
    base = corpus()
    truth = labelled(base)
    rng = np.random.default_rng(0)
    extra = [f"{base[i]} {base[j]}" for i, j in rng.integers(0, len(base), size=(max(args.size - len(base), 0), 2))]
    texts_file = WORK / f"texts-{args.size}.txt"
    WORK.mkdir(parents=True, exist_ok=True)
    texts_file.write_text("".join(t + "\n" for t in base + extra), encoding="utf-8")
    n = len(base) + len(extra)
    del extra
    result = {"texts": n, "corpus_texts": len(base), "k": 10, "machine": machine(), "rows": []}
    out_file = args.out
    every = {
        "cascade": (args.student, ["--verify", str(args.minilm)]),
        "student": (args.student, []),
        "minilm": (args.minilm, []),
    }
    tools = args.tools or ["cascade"] + ["student"] * (not args.cascade_only) + ["minilm"] * args.minilm_too
    runs = [(tool, *every[tool]) for tool in tools]
    for tool, model, extra_args in runs:
        out = WORK / f"{tool}-{args.size}"
        shutil.rmtree(out, ignore_errors=True)
        got = measured(siamese_cmd(model, texts_file, out, "-k", "10", *extra_args), log=out.with_suffix(".log"))
        labels = siamese_labels(out, n)
        row = {"tool": tool, "model": str(model), **got, **clustering(labels), "sets": scores(labels, truth)}
        if tool == "cascade":
            row["verifier"] = str(args.minilm)
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        write(out_file, result)


def distill(args) -> None:
    """``siamese distill`` and model2vec's ``distill`` of the same MiniLM, back to back, on the machine
    as it is and with ``--load`` busy processes beside them; model2vec's student is kept for SemHash."""
    from siamese.models.pretrained import model_folder

    result = {"machine": machine(), "rows": []}
    out_file = args.out
    WORK.mkdir(parents=True, exist_ok=True)
    variants = [
        ("siamese distill", [PY, "-m", "siamese", "distill", "--out"], {}, WORK / "student-distilled"),
        # model2vec's recipe in siamese: the teacher's token vectors alone, no corpus text encoded
        (
            "siamese distill --epochs 0",
            [PY, "-m", "siamese", "distill", "--epochs", "0", "--out"],
            {},
            WORK / "student-tokens",
        ),
    ]
    for extra in args.also:  # e.g. an earlier default beside today's: --also "--corpus-sample 64000 --epochs 6"
        flags = extra.split()
        out = WORK / "-".join(f.lstrip("-") for f in flags)
        variants.append((f"siamese distill {extra}", [PY, "-m", "siamese", "distill", *flags, "--out"], {}, out))
    if args.before:  # threads that spin while they wait (OMP_WAIT_POLICY unset, as before the fix)
        unset = "import os; import siamese.cli.root as r; os.environ.pop('OMP_WAIT_POLICY'); r.app(prog_name='siamese')"
        variants.append(
            ("siamese distill, spinning threads", [PY, "-c", unset, "distill", "--out"], {}, WORK / "student-spin")
        )
    variants.append(
        (
            "model2vec distill",
            [PY, __file__, "m2v-child", "--teacher", str(model_folder("minilm")), "--out"],
            {},
            args.m2v,
        )
    )
    for load in args.load:
        busy = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(load)]
        try:
            for name, cmd, env, out in variants:
                shutil.rmtree(out, ignore_errors=True)
                got = measured([*cmd, str(out)], env=env, log=WORK / f"distill-{len(result['rows'])}.log")
                row = {"tool": name, "busy_processes": load, "load_average_after": round(os.getloadavg()[0], 2), **got}
                result["rows"].append(row)
                print(json.dumps(row), flush=True)
                write(out_file, result)
        finally:
            for p in busy:
                p.kill()
                p.wait()


def m2v_child(args) -> None:
    """model2vec's distillation as its README shows it (256 PCA dimensions, the default)."""
    started = time.perf_counter()
    from model2vec.distill import distill as m2v_distill

    model = m2v_distill(model_name=args.teacher, pca_dims=256)
    model.save_pretrained(args.out)
    print(json.dumps({"seconds": round(time.perf_counter() - started, 1)}))


def machine() -> dict:
    return {"cpus": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(path)


def main() -> None:
    sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dedupe")
    d.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    d.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    d.add_argument("--no-matched", dest="matched", action="store_false")
    d.add_argument("--out", type=Path, default=RESULTS / "dedupe_peers.json", help="results file (JSON)")
    m = sub.add_parser("million")
    m.add_argument("--size", type=int, default=1_000_000)
    m.add_argument("--minilm-too", action="store_true", help="also MiniLM's own dedupe of the 1M (int8: ~25 min)")
    m.add_argument("--cascade-only", action="store_true", help="not the student alone")
    m.add_argument("--tools", nargs="+", choices=["cascade", "student", "minilm"], help="these runs, in this order")
    m.add_argument("--out", type=Path, default=RESULTS / "dedupe_peers-million.json", help="results file (JSON)")
    t = sub.add_parser("distill")
    t.add_argument("--load", type=int, nargs="+", default=[0, 2], help="busy processes beside each round")
    t.add_argument("--before", action="store_true", help="also siamese distill with spinning OpenMP threads")
    t.add_argument("--also", action="append", default=[], metavar="FLAGS", help="also siamese distill FLAGS")
    t.add_argument("--out", type=Path, default=RESULTS / "dedupe_peers-distill.json", help="results file (JSON)")
    for p in (d, m, t):
        p.add_argument("--student", type=Path, default=Path("runs/student"))
        p.add_argument("--minilm", type=Path, default=Path("runs/minilm"))
        p.add_argument("--m2v", type=Path, default=Path("runs/m2v-minilm"))
    c = sub.add_parser("m2v-child")
    c.add_argument("--teacher", required=True)
    c.add_argument("--out", required=True)
    for name in ("semhash-child", "semhash-matched-child"):
        c = sub.add_parser(name)
        c.add_argument("--texts", required=True)
        c.add_argument("--out", required=True)
        c.add_argument("--model", required=True)
        c.add_argument("--threshold", type=float, default=0.9)
        c.add_argument("--negatives")
    args = ap.parse_args()
    commands = {"dedupe": dedupe, "million": million, "distill": distill, "m2v-child": m2v_child}
    commands.update({"semhash-child": semhash_child, "semhash-matched-child": semhash_matched_child})
    commands[args.command](args)


if __name__ == "__main__":
    main()
