"""The ASCII fast path of BERT-normalised tokenizers (siamese.text.Vectorizer._encode_batch): a
model's encode with and without it, in one process, rounds interleaved, medians; the vectors
must be identical.

    .venv/bin/python bench/tokenize_fast_path.py --model runs/student-minilm [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from siamese import SiameseModel, datasets
from siamese.text import Vectorizer

SETS = ["quora-sample", "msrp-test", "sts-test", "mqp", "paws-wiki-test"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model", required=True, help="a model folder with a BERT-normalised tokenizer (e.g. siamese distill's)"
    )
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=4, help="the test sets' distinct texts, this many times over")
    args = ap.parse_args()
    model = SiameseModel.load(args.model)
    texts = []
    for name in SETS:
        pairs = datasets.load(name)
        texts += pairs.text1 + pairs.text2
    texts = list(dict.fromkeys(texts)) * args.repeat
    with_twin = Vectorizer._ascii_twin
    speeds, vectors = {"normalizer": [], "ascii fast path": []}, {}
    model.encode(texts[:2000])  # warm-up
    for _ in range(args.rounds):
        for mode in speeds:
            Vectorizer._ascii_twin = (lambda self: None) if mode == "normalizer" else with_twin
            started = time.perf_counter()
            vectors[mode] = model.encode(texts)
            speeds[mode].append(len(texts) / (time.perf_counter() - started))
    Vectorizer._ascii_twin = with_twin
    result = {
        "model": args.model,
        "texts": len(texts),
        "ascii_share": round(sum(t.isascii() for t in texts) / len(texts), 4),
        **{f"{k} texts/s": round(float(np.median(v))) for k, v in speeds.items()},
        "identical": bool(np.array_equal(*vectors.values())),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
