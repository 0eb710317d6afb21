"""Which corpus texts should a small distillation sample hold? A seeded random sample (what
`siamese distill --corpus-sample N` draws) against a *covering* one: the texts chosen first so that
every token of the corpus (the teacher's WordPiece tokens and the corpus words distillation would add)
that occurs in at least ``--min-df`` texts is in at least ``--cover`` of them, rarest tokens first, up
to ``--cover-share`` of the sample; the rest drawn at random. Each student is judged on the job:
`bench/dedupe_peers.py dedupe` on the 25 % corpus, recall at the matched point.

    python bench/distill_sample_cover.py random:16000:12:0 cover:16000:12:0 random:64000:6:0 ...
    (KIND:SIZE:EPOCHS:SEED; MiniLM's vectors of the corpus are bench/distill_corpus_size.py's,
    kept in runs/distill-corpus-size/targets.npy; lines appended to bench/results/distill-sample-cover.jsonl)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "runs" / "distill-cover"
RESULTS = ROOT / "bench" / "results"


def covering_rows(ids: list[np.ndarray], size: int, seed: int, cover: int, min_df: int, share: float) -> np.ndarray:
    """Rows of a sample of ``size`` texts: first, rarest token first, random texts holding each token of
    document frequency >= ``min_df`` until it is in ``cover`` chosen texts (at most ``share`` x size
    texts so chosen); then random texts."""
    rng = np.random.default_rng(seed)
    vocab = int(max(a.max() for a in ids if len(a))) + 1
    holders: list[list[int]] = [[] for _ in range(vocab)]
    for i, a in enumerate(ids):
        for t in np.unique(a):
            holders[t].append(i)
    df = np.array([len(h) for h in holders])
    seen = np.zeros(vocab, dtype=int)
    chosen: set[int] = set()
    budget = int(share * size)
    for t in np.argsort(df, kind="stable"):
        if df[t] < min_df or seen[t] >= cover:
            continue
        free = [i for i in holders[t] if i not in chosen]
        for i in rng.choice(free, min(cover - seen[t], len(free)), replace=False):
            chosen.add(int(i))
            seen[np.unique(ids[int(i)])] += 1
        if len(chosen) >= budget:
            break
    rest = np.setdiff1d(np.arange(len(ids)), np.fromiter(chosen, dtype=int))
    fill = rng.choice(rest, max(size - len(chosen), 0), replace=False)
    return np.sort(np.concatenate([np.fromiter(chosen, dtype=int), fill]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="+", metavar="KIND:SIZE:EPOCHS:SEED")
    parser.add_argument("--cover", type=int, default=2, help="texts per token in a covering sample")
    parser.add_argument("--min-df", type=int, default=5, help="tokens in fewer corpus texts are not covered")
    parser.add_argument("--cover-share", type=float, default=0.5, help="at most this share of the sample covers")
    parser.add_argument("--out", type=Path, default=RESULTS / "distill-sample-cover.jsonl")
    args = parser.parse_args()

    import torch
    from distill_corpus_size import corpus_targets  # bench/ is this script's first sys.path entry

    from siamese.config.static import StaticConfig
    from siamese.distill.corpus import default_corpus
    from siamese.distill.static import distill_static, subword_vectorizer
    from siamese.models.pretrained_folder import set_threshold, validation_parts
    from siamese.models.sentence_encoder import load_bi_encoder

    torch.set_num_threads(2)
    teacher = load_bi_encoder("minilm", device="cpu")
    corpus = default_corpus()  # distinct non-empty texts, in the order the cached targets follow
    targets = corpus_targets(teacher, corpus)
    ids = None
    for spec in args.specs:
        kind, size, epochs, seed = spec.split(":")
        size, epochs, seed = int(size), int(epochs), int(seed)
        if kind == "random":  # distill_static draws the sample, as `siamese distill --corpus-sample` does
            texts, given, config = corpus, targets, StaticConfig(epochs=epochs, corpus_sample=size, seed=seed)
        elif kind == "cover":
            if ids is None:  # the corpus's tokens as distillation of the whole corpus would cut them
                ids = subword_vectorizer(teacher, corpus, StaticConfig())[0].encode(corpus)
            rows = covering_rows(ids, size, seed, args.cover, args.min_df, args.cover_share)
            texts, given = [corpus[i] for i in rows], targets[rows]
            config = StaticConfig(epochs=epochs, corpus_sample=0, seed=seed)
        else:
            raise SystemExit(f"{spec}: KIND is random or cover")
        started = time.perf_counter()
        student = distill_static(teacher, texts, config, targets=given, progress=False)
        seconds = round(time.perf_counter() - started, 1)
        set_threshold(student, validation_parts(None))
        name = spec.replace(":", "-")
        folder = WORK / name
        student.save(folder, overwrite=True)
        result = RESULTS / f"distill-sample-cover-{name}.json"
        cmd = [sys.executable, str(ROOT / "bench" / "dedupe_peers.py"), "dedupe", "--fractions", "0.25"]
        cmd += ["--tools", "student", "--student", str(folder), "--out", str(result)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        matched = json.loads(result.read_text())["matched"]["student"]
        row = {
            "spec": spec,
            "cover": args.cover if kind == "cover" else None,
            "min_df": args.min_df if kind == "cover" else None,
            "cover_share": args.cover_share if kind == "cover" else None,
            "tokens": student.info["distillation"]["tokens"],
            "train_seconds_given_targets": seconds,
            "matched_threshold": matched["threshold"],
            **{f"{k}_recall": v["recall"] for k, v in matched["sets"].items() if "recall" in v},
        }
        print(json.dumps(row), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
