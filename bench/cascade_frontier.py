"""What would close the cascade's recall gap to MiniLM's own at the matched point, and what would it
cost? Offline, from the vectors that ``bench/dedupe_peers.py dedupe --fractions 0.25`` saved (the
student's and MiniLM's run folders under runs/dedupe_peers): the cascade re-played with numpy from
the library's own pieces (the student's top-k candidates, ``choose_band``, greedy clusters) at
MiniLM's matched threshold, with

- the band as ``dedupe --verify`` chooses it, for a proposer of k = 20, 30, 50 neighbours;
- every candidate verified (the best any band can do with that proposer);
- the band's lower edge forced down (more texts for MiniLM to encode);
- each text's links capped at its 20 best (MiniLM's own run examines 20 neighbours).

Recall per labelled set and the MiniLM texts each needs (its cost: MiniLM's time is per text).
One JSON line per variant:

    python bench/cascade_frontier.py > bench/results/dedupe_peers-cascade-frontier.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

MATCHED = 0.76022  # MiniLM's threshold at 10 % of MQP's non-duplicates merged (bench/results/dedupe_peers.json)
FLOOR = 0.51  # dedupe's candidate floor at that threshold (threshold - 0.25)


def main() -> None:
    import dedupe_peers as dp

    from siamese.decision.cascade import choose_band
    from siamese.search.cascade import best_links
    from siamese.search.pairs import DuplicatePairs, duplicate_pairs, greedy

    texts = dp.corpus()
    truth = dp.labelled(texts)
    rows = dp.subset(texts, truth, 0.25)
    sub, n = dp.remap(truth, rows), len(rows)
    student = np.load(dp.WORK / "student-0.25" / "vectors.npy")
    minilm = np.load(dp.WORK / "minilm-0.25" / "vectors.npy")
    assert len(student) == len(minilm) == n, "run bench/dedupe_peers.py dedupe --fractions 0.25 first"

    def emit(variant: str, first, second, decision, **extra) -> None:
        labels = np.arange(n)
        for group in greedy(n, DuplicatePairs(first, second, decision.astype(np.float32))):
            labels[group] = group[0]
        scored = dp.scores(labels, sub)
        sets = {name: (x["recall"], x.get("false_merges")) for name, x in scored.items()}
        print(json.dumps({"variant": variant, **extra, "links": len(first), "sets": sets}), flush=True)

    own = duplicate_pairs(minilm, MATCHED, k=20)
    emit("minilm alone, k 20", own.first, own.second, own.similarity, texts_encoded=n)
    for k in (20, 30, 50):
        found = duplicate_pairs(student, FLOOR, k=k)
        first, second, sim = found.first, found.second, found.similarity
        verifier = np.einsum("ij,ij->i", minilm[first], minilm[second])
        says = verifier > MATCHED
        band, _, _ = choose_band(sim, says.__getitem__, floor=FLOOR, agreement=0.99)
        hi = 1.0 if band.hi is None else band.hi
        lows = [band.lo] + ([0.55, 0.53, 0.51] if k == 20 else [])
        for lo in lows:
            asked = (sim >= lo) & (sim <= hi)
            keep = (asked & says) | (sim > hi)
            decision = np.where(asked, verifier, np.maximum(sim, np.nextafter(np.float32(MATCHED), 2)))
            encoded = len(np.unique(np.concatenate([first[asked], second[asked]])))
            label = "band as chosen" if lo == band.lo else "lower edge forced"
            extra = {"k": k, "band": [round(float(lo), 3), round(float(hi), 3)], "texts_encoded": encoded}
            emit(f"cascade, {label}", first[keep], second[keep], decision[keep], **extra)
            if lo == band.lo and k > 20:
                top = keep & best_links(first, second, np.where(keep, decision, -1.0), 20)
                emit("cascade, band as chosen, links capped at 20", first[top], second[top], decision[top], **extra)
        every = says & best_links(first, second, np.where(says, verifier, -1.0), 20) if k > 20 else says
        candidates = len(np.unique(np.concatenate([first, second])))
        emit("every candidate verified", first[every], second[every], verifier[every], k=k, texts_encoded=candidates)


if __name__ == "__main__":
    main()
