"""Why is the cascade (student proposes, MiniLM decides) under MiniLM's own recall at the matched
point? The cascade at MiniLM's matched threshold on the 25 % corpus of ``bench/dedupe_peers.py``
(run that first: it makes the corpus, the student and MiniLM folders), for each ``K:AGREEMENT``:
the proposer's neighbours per text and the band's agreement target. One JSON line each.

    python bench/cascade_neighbours.py 20:0.99 50:0.99 50:0.998 20:0.998 \\
        > bench/results/dedupe_peers-cascade-k.jsonl
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MATCHED = 0.76022  # MiniLM's threshold at 10 % of MQP's non-duplicates merged (bench/results/dedupe_peers.json)


def main() -> None:
    import dedupe_peers as dp

    from siamese.models.loading import load_verifier
    from siamese.models.static_reader import open_static
    from siamese.search.run import dedupe

    texts = dp.corpus()
    truth = dp.labelled(texts)
    rows = dp.subset(texts, truth, 0.25)
    part, sub = [texts[i] for i in rows], dp.remap(truth, rows)
    student, minilm = open_static("runs/student", "cpu"), load_verifier("runs/minilm", device="cpu")
    for spec in sys.argv[1:]:
        k_text, agreement_text = spec.split(":")
        k, agreement = int(k_text), float(agreement_text)
        out = dp.WORK / f"cascade-k{k}-a{agreement}"
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        run = dedupe(student, part, out, threshold=MATCHED, verify=minilm, verify_agreement=agreement, k=k)
        seconds = time.perf_counter() - started
        verified = run.meta["verified"]
        labels = dp.siamese_labels(out, len(part))
        scored = dp.scores(labels, sub)
        print(
            json.dumps(
                {
                    "k": k,
                    "agreement": agreement,
                    "seconds": round(seconds),
                    "band": verified["band"],
                    "texts_encoded": verified["texts_encoded"],
                    "verified": verified["verified"],
                    "candidates": verified["candidates"],
                    "sets": {n: (x["recall"], x.get("false_merges")) for n, x in scored.items()},
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
