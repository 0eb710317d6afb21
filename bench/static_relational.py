"""The static student's relational term: its weight and temperature against the direction loss
alone, on the validation sets (and the Quora sample, shown). One teacher pass (the corpus's
teacher vectors computed once), then one student per setting, the rest of StaticConfig at its
defaults.

    .venv/bin/python bench/static_relational.py   # ~20 min on an AVX2-only 2-core CPU; writes results/static_relational.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from static_corpus import scores  # noqa: E402  (this folder: the same per-set metrics)

from siamese.distill import StaticConfig, default_corpus, distill_static  # noqa: E402
from siamese.teachers import load_teacher  # noqa: E402

HERE = Path(__file__).resolve().parent
SETS = ["msrp-val", "sts-dev", "semeval-dev", "mqp", "quora-sample"]
SETTINGS = [
    (0.0, 0.1),
    (1.0, 0.05),
    (2.0, 0.05),
    (1.0, 0.1),
    (4.0, 0.1),
    (8.0, 0.1),
    (4.0, 0.2),
]  # (weight, temperature)


def main() -> None:
    texts = list(dict.fromkeys(t for t in default_corpus() if t.strip()))
    teacher, info = load_teacher("minilm", max_length=128)
    targets = teacher.encode(texts, progress=False)
    result = []
    for weight, temperature in SETTINGS:
        student = distill_static(
            teacher,
            texts,
            StaticConfig(relational=weight, temperature=temperature),
            teacher_info=info,
            targets=targets,
            progress=False,
        )
        history = student.info["distillation"]["history"]
        kept = next(h for h in history if h.get("kept"))
        row = {
            "relational": weight,
            "temperature": temperature,
            "epoch_kept": kept["epoch"],
            "held_out_cosine": kept["val_cosine"],
        }
        row.update(scores(student, SETS))
        print(row, flush=True)
        result.append(row)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "static_relational.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
