"""How a kept fine-tune's threshold is chosen (siamese.training.learn._hedge_threshold), decided on the
train side only: for each ``set:seed``, ``siamese train --from minilm`` on bench-learn's 200 labels, then
the accuracy of three thresholds on 1,500 pool pairs outside the labels (``poolrest_*``: what chose the
rule) and on the test split (``test_*``: reported, never used to choose) — the fold models' held-out
choice (``oof``), the final model's own cosines of the labels (``in``), their midpoint (``mid``).

    python bench/learn_threshold_selection.py twitter-url:1 mqp:0 sick:0 semeval-cqa:0 paws-qqp:0
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    import learn as bench  # bench/learn.py: the same sets, splits and labels

    from siamese.training.learn import LearnOptions, learn

    for spec in sys.argv[1:]:
        name, seed_text = spec.split(":")
        seed = int(seed_text)
        pool, test, _ = bench.load_set(name, 2000)
        rows = bench.labelled(pool, "200", seed)
        labels = pool.subset(rows)
        model = learn(labels, "minilm", options=LearnOptions(seed=seed, device="cpu"))
        info = model.info["learned"]
        choice = info["threshold_choice"]
        # the held-out choice as the model records it (before the midpoint rule: the threshold itself)
        oof = choice.get("held_out_threshold", model.threshold)
        own = bench.best_cut(bench.cosines(model, labels), labels.labels)
        rest = pool.subset(np.setdiff1d(np.arange(len(pool)), rows)[:1500])
        test_cos, rest_cos = bench.cosines(model, test), bench.cosines(model, rest)
        row = {
            "set": name,
            "seed": seed,
            "chosen": info["chosen"],
            "epoch": info["epoch"],
            "thr_oof": oof,
            "thr_in": own,
        }
        for key, t in (("oof", oof), ("in", own), ("mid", (oof + own) / 2)):
            row[f"test_{key}"] = bench.metrics(test_cos, test.labels, t)["accuracy"]
            row[f"poolrest_{key}"] = bench.metrics(rest_cos, rest.labels, t)["accuracy"]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
