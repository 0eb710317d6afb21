"""How many corpus texts the static student learns from (StaticConfig.corpus_sample) and for how many
epochs: MiniLM's vectors of the default corpus (siamese.distill.default_corpus, 128,274 texts) computed
once, students distilled on seeded random samples of it, judged on validation sets held out of the
corpus only (ROC-AUC on MSRP val, SemEval dev and MQP, Spearman's rho on STS-B dev).

    python bench/distill_corpus_size.py 128274:6 128274:0 16000:6 16000:12 24000:10 24000:12 \
        32000:6 32000:10 32000:12 64000:6
    (SIZE:EPOCHS[:SEED]; the teacher's vectors are kept in runs/distill-corpus-size/targets.npy between runs)
    python bench/distill_corpus_size.py model2vec     # model2vec's distillation of MiniLM, judged alike
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
WORK = Path(__file__).resolve().parents[1] / "runs" / "distill-corpus-size"
VALIDATION = ["msrp-val", "sts-dev", "semeval-dev", "mqp"]


def judge(model, sets: dict) -> dict:
    from scipy.stats import spearmanr
    from sklearn.metrics import roc_auc_score

    out = {}
    for name, pairs in sets.items():
        texts = sorted(set(pairs.text1) | set(pairs.text2))
        at = {t: i for i, t in enumerate(texts)}
        v = model.encode(texts)
        cos = np.einsum("ij,ij->i", v[[at[t] for t in pairs.text1]], v[[at[t] for t in pairs.text2]])
        score = spearmanr(cos, pairs.labels)[0] if name == "sts-dev" else roc_auc_score(pairs.labels, cos)
        out[name] = round(float(score), 4)
    return out


def judge_model2vec(sets: dict) -> dict:
    """model2vec's distillation of the same MiniLM (its README's call, 256 PCA dimensions), its vectors made
    unit length as a cosine reads them."""
    from model2vec.distill import distill

    from siamese.models.pretrained import model_folder

    started = time.perf_counter()
    static = distill(model_name=str(model_folder("minilm")), pca_dims=256)
    seconds = time.perf_counter() - started

    class Unit:
        def encode(self, texts):
            v = static.encode(texts)
            return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    scores = judge(Unit(), sets)
    mean = round(float(np.mean(list(scores.values()))), 4)
    return {"model2vec": True, "seconds": round(seconds), **scores, "mean": mean}


def corpus_targets(teacher, corpus: list[str]) -> np.ndarray:
    """The teacher's vectors of the default corpus, computed once and kept in WORK/targets.npy."""
    cached = WORK / "targets.npy"
    if cached.exists():
        return np.load(cached)
    WORK.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    targets = teacher.encode(corpus)
    np.save(cached, targets)
    print(json.dumps({"teacher_seconds": round(time.perf_counter() - started), "texts": len(corpus)}), flush=True)
    return targets


def main() -> None:
    import torch

    from siamese.config.static import StaticConfig
    from siamese.data import datasets
    from siamese.distill.corpus import default_corpus
    from siamese.distill.static import distill_static
    from siamese.models.sentence_encoder import load_bi_encoder

    torch.set_num_threads(2)
    teacher = load_bi_encoder("minilm", device="cpu")
    corpus = default_corpus()
    targets = corpus_targets(teacher, corpus)
    sets = {name: datasets.load(name) for name in VALIDATION}
    for spec in sys.argv[1:]:
        if spec == "model2vec":
            print(json.dumps(judge_model2vec(sets)), flush=True)
            continue
        size, epochs, *rest = (int(x) for x in spec.split(":"))
        seed = rest[0] if rest else 0  # the sample, the held-out texts, the batches
        config = StaticConfig(epochs=epochs, corpus_sample=size, seed=seed)  # drawn as `siamese distill` draws it
        started = time.perf_counter()
        model = distill_static(teacher, corpus, config, targets=targets, progress=False)
        seconds = time.perf_counter() - started
        scores = judge(model, sets)
        used = model.info["distillation"]["corpus_texts"]
        row = {"texts": used, "epochs": epochs, "seed": seed, "seconds_with_given_targets": round(seconds), **scores}
        print(json.dumps({**row, "mean": round(float(np.mean(list(scores.values()))), 4)}), flush=True)


if __name__ == "__main__":
    main()
