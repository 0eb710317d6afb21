"""Cross-set dedupe (the train/test leakage check) at scale: 100,000 new texts against a reference
of 100,000 and of 1,000,000 texts, end to end through ``dedupe_against``.

Texts: the distinct questions and sentences of the shared data (bench/search.py's corpus, ~198k)
and, for scale, texts made by joining two of them at random (the shared data hold no 1M distinct
texts). The reference is the first 100k / 1M of a shuffled pool; the new set is 90% texts in
neither reference (other joined texts), 5% exact copies of texts of the 100k reference with their
whitespace changed, and 5% near copies of them (lower-cased, punctuation dropped): both kinds must
be flagged. Two ways to give the reference: a text list (encoded in the run, exact up to 50k
texts, IVF beyond) and a prebuilt IVF index folder (its build timed apart, as an index is built
once and checked against many times).

    .venv/bin/python bench/dedupe_cross.py --model MODEL [--threshold 0.9] [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

import faiss
import numpy as np
from search import corpus_texts, peak_mb, timed

from siamese import SiameseModel
from siamese.search import DuplicateIndex, dedupe_against

HERE = Path(__file__).resolve().parent


def texts_for(size: int, new: int, seed: int = 0) -> tuple[list[str], list[str], dict]:
    """(reference of ``size`` texts, ``new`` texts, what was planted)."""
    rng = np.random.default_rng(seed)
    base = corpus_texts()
    need = size + new  # joined texts beyond the real ones: the reference's and the new set's unseen part
    joined = {f"{base[i]} {base[j]}" for i, j in rng.integers(0, len(base), size=(int(need * 1.05), 2))}
    joined = sorted(joined - set(base))
    rng.shuffle(joined)
    pool = base + joined[: max(size - len(base), 0)]
    rng.shuffle(pool)
    reference = pool[:size]
    unseen = joined[max(size - len(base), 0) :][: int(new * 0.9)]
    inside = rng.choice(min(size, 100_000), size=new - len(unseen), replace=False)
    half = len(inside) // 2
    exact = ["  " + reference[i].replace(" ", "  ") + " " for i in inside[:half]]
    near = [re.sub(r"[^\w\s]", "", reference[i].lower()) for i in inside[half:]]
    texts = unseen + exact + near
    return (
        reference,
        texts,
        {
            "unseen": len(unseen),
            "exact_copies": len(exact),
            "near_copies": len(near),
            "planted_rows": list(range(len(unseen), len(texts))),
        },
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--new", type=int, default=100_000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--threshold", type=float, default=None, help="default: the model's")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "dedupe_cross.json")
    args = ap.parse_args()
    model = SiameseModel.load(args.model)
    t = model.threshold if args.threshold is None else args.threshold
    res = {
        "model": str(args.model),
        "encoder": model.config.encoder,
        "dim": model.dim,
        "threshold": t,
        "k": args.k,
        "faiss_threads": faiss.omp_get_max_threads(),
        "runs": [],
    }
    for size in args.sizes:
        reference, texts, planted = texts_for(size, args.new)
        rows = set(planted.pop("planted_rows"))
        row = {"reference": size, "new": len(texts), **planted}
        _, s = timed(model.encode, reference[:20_000], batch_size=1024)
        row["encode_texts_per_second"] = round(20_000 / s)
        with tempfile.TemporaryDirectory() as tmp:
            run, s = timed(dedupe_against, model, texts, reference, Path(tmp) / "texts", threshold=t, k=args.k)
            flagged = {f.record.row for f in run.flagged()}
            row["from_texts"] = {
                "seconds": round(s, 1),
                "flagged": len(flagged),
                "planted_found": round(len(flagged & rows) / len(rows), 4),
                "unseen_flagged": len(flagged - rows),
            }
            print(json.dumps(row), flush=True)
            index = DuplicateIndex(model, kind="ivf")
            _, s = timed(index.add, reference, allow_duplicates=True)
            row["index_build_seconds"] = round(s, 1)
            run, s = timed(dedupe_against, model, texts, index, Path(tmp) / "index", threshold=t, k=args.k)
            flagged = {f.record.row for f in run.flagged()}
            row["from_index"] = {
                "seconds": round(s, 1),
                "flagged": len(flagged),
                "planted_found": round(len(flagged & rows) / len(rows), 4),
            }
            _, s = timed(run.rethreshold, min(t + 0.02, 0.99))
            row["rethreshold_seconds"] = round(s, 2)
            del index, run
        row["peak_rss_mb"] = round(peak_mb())
        res["runs"].append(row)
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
