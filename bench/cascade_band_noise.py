"""How far does the cascade's band move between samples of one corpus? Offline, from the vectors that
``bench/dedupe_peers.py dedupe --fractions F`` saved (runs/dedupe_peers/student-F, minilm-F): the
student's candidates (k = 20, floor 0.51) at MiniLM's matched threshold 0.76022, every candidate's
verdict by MiniLM known, so the exact lower edge (at most 0.5 % of MiniLM's duplicates under it) is
known too. Then 30 samples as ``choose_band`` draws them (48 pairs a 0.01 bin), each bin's share of
duplicates estimated by

- ``per bin``: the sampled pairs of the bin alone (``choose_band`` before 2026-11-28);
- ``logistic``: one Platt fit of the verdicts on the similarity over every sampled pair (now);
- ``larger of the two``.

One JSON line per fraction and estimator: the lower edges' median and range, and MiniLM's duplicates
left under the edge (median, worst) against the 0.5 % allowed.

    python bench/cascade_band_noise.py 0.25 0.5 > bench/results/dedupe_peers-band-noise.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

MATCHED, FLOOR, WIDTH, PER_BIN, SAMPLES = 0.76022, 0.51, 0.01, 48, 30


def lower_edge(positives: np.ndarray) -> int:
    below = np.concatenate([[0.0], np.cumsum(positives)])
    return int(np.flatnonzero(below <= 0.005 * positives.sum()).max())


def main() -> None:
    import dedupe_peers as dp

    from siamese.decision.threshold import chance, platt
    from siamese.search.pairs import duplicate_pairs

    for fraction in sys.argv[1:] or ["0.25"]:
        student = np.load(dp.WORK / f"student-{fraction}" / "vectors.npy")
        minilm = np.load(dp.WORK / f"minilm-{fraction}" / "vectors.npy")
        found = duplicate_pairs(student, FLOOR, k=20)
        sim = found.similarity.astype(np.float32)
        says = np.einsum("ij,ij->i", minilm[found.first], minilm[found.second]) > MATCHED
        bins = np.maximum(np.minimum(((sim - FLOOR) / WIDTH).astype(np.int64), int(np.ceil((1 - FLOOR) / WIDTH))), 0)
        count = np.bincount(bins)
        exact = FLOOR + WIDTH * lower_edge(np.bincount(bins, weights=says, minlength=len(count)))
        middle = FLOOR + (np.arange(len(count)) + 0.5) * WIDTH
        edges: dict[str, list[float]] = {}
        for seed in range(SAMPLES):
            rng = np.random.default_rng(seed)
            picked = [
                rng.choice(np.flatnonzero(bins == b), min(PER_BIN, int(n)), replace=False)
                for b, n in enumerate(count)
                if n
            ]
            rows = np.sort(np.concatenate(picked))
            sampled = np.bincount(bins[rows], minlength=len(count))
            hits = np.bincount(bins[rows], weights=says[rows], minlength=len(count))
            per_bin = np.divide(hits, sampled, out=np.zeros(len(count)), where=sampled > 0)
            logistic = chance(platt(sim[rows], says[rows]), middle)
            for name, share in (
                ("per bin", per_bin),
                ("logistic", logistic),
                ("larger of the two", np.maximum(per_bin, logistic)),
            ):
                edges.setdefault(name, []).append(FLOOR + WIDTH * lower_edge(share * count))
        for name, lows in edges.items():
            missed = [int(says[sim < lo].sum()) for lo in lows]
            print(json.dumps({
                "fraction": float(fraction), "estimator": name, "pairs": len(sim), "exact_lo": round(exact, 2),
                "lo_median": round(float(np.median(lows)), 2), "lo_range": [round(min(lows), 2), round(max(lows), 2)],
                "missed_median": int(np.median(missed)), "missed_worst": max(missed),
                "allowed": int(0.005 * says.sum()),
            }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
