"""The cascade on labelled pairs: a bi-encoder alone vs the bi-encoder with a cross-encoder
deciding the pairs within a band of its threshold, and the cost (pairs verified per second),
extrapolated to a 1M-text dedupe.

    .venv/bin/python bench/cascade.py --bi minilm --cross m/cross --band 0.1

The bi-encoder's threshold is chosen on the validation mix (siamese.datasets.VALIDATION), the
cross-encoder's is its own; the test sets are never used to choose anything.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from siamese import datasets
from siamese.cross import CrossEncoder
from siamese.evaluation import choose_threshold
from siamese.search.cascade import verify
from siamese.sentence_encoder import from_pretrained

SETS = ["quora-sample", "paws-qqp-dev-test", "msrp-test"]


def accuracy(keep: np.ndarray, labels: np.ndarray) -> float:
    return float((keep == (labels == 1)).mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bi", default="minilm", help="a bi-encoder: minilm, mpnet or a model folder")
    p.add_argument("--cross", type=Path, required=True, help="a cross-encoder folder (siamese train --cross)")
    p.add_argument("--band", type=float, default=0.1)
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("results") / "cascade.json")
    args = p.parse_args()
    root = datasets.data_root()
    val = datasets.load_many(datasets.VALIDATION, root)
    bi = from_pretrained(args.bi, [val]) if not Path(args.bi).is_dir() else None
    if bi is None:
        from siamese import SiameseModel

        bi = SiameseModel.load(args.bi)
    cross = CrossEncoder.load(args.cross)
    rows = []
    for name in SETS:
        pairs = datasets.load(name, root)
        t0 = time.perf_counter()
        sims = bi.similarity(pairs.text1, pairs.text2)
        bi_seconds = time.perf_counter() - t0
        texts = list(pairs.text1) + list(pairs.text2)
        left, right = np.arange(len(pairs)), np.arange(len(pairs)) + len(pairs)
        band = verify(cross, texts, left, right, sims, threshold=bi.threshold, band=args.band)
        everything = verify(cross, texts, left, right, sims, threshold=bi.threshold, band=None)
        best_bi = choose_threshold(sims, pairs.labels)[1][
            "value"
        ]  # accuracy at an oracle threshold, for reference only
        rows.append(
            {
                "set": name,
                "pairs": len(pairs),
                "bi_threshold": bi.threshold,
                "bi_accuracy": accuracy(sims > bi.threshold, pairs.labels),
                "bi_oracle_accuracy": best_bi,
                "cascade_accuracy": accuracy(band.keep, pairs.labels),
                "verified": band.verified,
                "cross_all_accuracy": accuracy(everything.keep, pairs.labels),
                "bi_pairs_per_second": round(len(pairs) / bi_seconds, 1),
                "verified_pairs_per_second": round(everything.verified / everything.seconds, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"band": args.band, "bi": args.bi, "cross": str(args.cross), "rows": rows}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
