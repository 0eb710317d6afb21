"""A static student distilled from a sentence encoder: one vector per word, pooled by the bag of
words (:class:`siamese.encoders.BagOfWordsEncoder`), so it encodes at bag-of-words speed.

Two steps, after model2vec (Tulkens & van Dongen 2024) and its tokenlearn recipe:

1. **Start** each word's vector at the teacher's own embedding of that word alone, projected on
   the main directions of the teacher's sentence vectors (PCA, uncentred so cosines keep their
   meaning), and each word's weight at its SIF weight ``a / (a + p(word))`` from the corpus
   (frequent words count little).
2. **Train** the vectors and weights so the student's vector of each corpus text points where
   the teacher's (projected) vector points: loss ``1 − cos(student, teacher)``. The teacher is
   run once per distinct text; the student never sees a label here.

Labelled pairs can then fine-tune the student like any bag-of-words model
(:func:`siamese.training.train` with ``initial=``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from ..encoders import BagOfWordsEncoder
from ..errors import ConfigError, DataError
from ..model import ModelConfig, SiameseModel
from ..optim import LazyAdam
from ..text import PAD_ID, UNK_ID, Vectorizer, pad


@dataclass
class StaticConfig:
    """How the static student is built and trained."""

    dim: int = 256  # student width (≤ the teacher's): the table is words × dim floats
    max_vocab: int | None = 100_000  # the most frequent corpus words get a vector; others share [UNK]'s
    min_frequency: int = 1
    epochs: int = 10
    batch_size: int = 1024
    lr: float = 3e-3
    val_fraction: float = 0.02  # corpus texts held out: training keeps the epoch closest to the teacher on them
    # Each batch also holds each text's nearest neighbour by the teacher, and the student's cosines
    # of all the batch's texts are pulled towards the teacher's (mean squared error, this weight):
    # the fine distinctions between close texts are what duplicate detection needs, and matching
    # vectors alone spends the student's few parameters on directions that rarely decide a pair.
    pair_weight: float = 1.0
    vocabulary: str = "words"  # "subwords": the teacher's own tokens plus the corpus's frequent words
    extra_words: int = 50_000  # subwords: corpus words added as tokens of their own
    max_length: int | None = 128
    seed: int = 0

    def check(self) -> None:
        if self.dim < 2 or self.epochs < 0 or self.batch_size < 2 or not self.lr > 0:
            raise ConfigError("dim >= 2, epochs >= 0, batch_size >= 2 and lr > 0 are required")
        if not 0 <= self.val_fraction < 0.5:
            raise ConfigError(f"val_fraction must be in [0, 0.5), got {self.val_fraction}")


def distill_static(teacher: SiameseModel, texts: Sequence[str], config: StaticConfig | None = None, *,
                   teacher_info: dict | None = None, targets: np.ndarray | None = None, progress: bool = True) -> SiameseModel:
    """A bag-of-words :class:`SiameseModel` whose cosines imitate ``teacher``'s on ``texts`` (the
    corpus). ``targets``: the teacher's vectors of the distinct texts, if already computed."""
    config = config or StaticConfig()
    config.check()
    texts = list(dict.fromkeys(t for t in texts if t.strip()))
    if len(texts) < 10:
        raise DataError(f"the distillation corpus has {len(texts)} distinct texts; at least 10 are needed")
    started = time.perf_counter()
    log = tqdm.write if progress else (lambda *_: None)
    if config.vocabulary == "subwords":
        vectorizer, added = subword_vectorizer(teacher, texts, config)
        words = vectorizer.vocabulary()
        log(f"distill: teacher vectors of {len(texts):,} texts and {len(words):,} tokens ({added:,} of them corpus words)")
        word_vectors = token_vectors(teacher, vectorizer, len(words) - added, progress)
    else:
        vectorizer = Vectorizer.fit(texts, max_vocab=config.max_vocab, min_frequency=config.min_frequency,
                                    lowercase=True, max_length=config.max_length)
        words = vectorizer.vocabulary()
        log(f"distill: teacher vectors of {len(texts):,} texts and {len(words) - 2:,} words")
        word_vectors = np.zeros((len(words), teacher.dim), dtype=np.float32)
        word_vectors[2:] = teacher.encode(words[2:], progress=progress)  # [PAD] and [UNK] are not words
    if targets is None:
        targets = teacher.encode(texts, progress=progress)
    targets = np.asarray(targets, dtype=np.float32)
    teacher_seconds = time.perf_counter() - started
    if config.dim > targets.shape[1]:
        raise ConfigError(f"dim {config.dim} is wider than the teacher's vectors ({targets.shape[1]})")
    # The main directions of the teacher's sentence vectors (uncentred: a cosine of projections is
    # then close to the cosine of the originals).
    _, _, vt = np.linalg.svd(targets[:: max(1, len(targets) // 50_000)], full_matrices=False)
    projection = vt[: config.dim].T.astype(np.float32)  # (teacher dim, dim)
    table = word_vectors @ projection
    model_config = ModelConfig(encoder="bow", dim=config.dim, head="cosine", loss="cosent", max_vocab=config.max_vocab,
                               min_frequency=config.min_frequency, max_length=config.max_length, seed=config.seed,
                               tokenizer=config.vocabulary)
    encoder = BagOfWordsEncoder(vectorizer.vocab_size, embedding_dim=config.dim, word_counts=vectorizer.counts(texts),
                                embeddings=table)
    with torch.no_grad():
        encoder.embedding.weight[PAD_ID] = 0
        if config.vocabulary == "words":
            encoder.embedding.weight[UNK_ID] = 0  # an unknown word is no evidence either way
    model_config.encoder_options = {"embedding_dim": config.dim}
    model = SiameseModel(vectorizer, encoder, model_config)
    goal = F.normalize(torch.from_numpy(targets @ projection), dim=-1)
    history = fit_to_teacher(model, texts, goal, config, progress)
    model.info = {"distillation": {"kind": "static", **asdict(config), "teacher": teacher_info or {},
                                   "corpus_texts": len(texts), "words": len(words) - 2,
                                   "teacher_seconds": round(teacher_seconds, 1), "history": history,
                                   "seconds": round(time.perf_counter() - started, 1)}}
    return model


def fit_to_teacher(model: SiameseModel, texts: list[str], goal: torch.Tensor, config: StaticConfig,
                   progress: bool) -> list[dict]:
    """Adam on the word vectors and weights; keeps the weights of the epoch whose held-out texts
    are closest to the teacher (mean cosine)."""
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(texts))
    cut = int(round(config.val_fraction * len(texts)))
    val_rows, train_rows = order[:cut], order[cut:]
    ids = model.vectorizer.encode(texts)
    encoder = model.encoder
    optimizer = LazyAdam([p for p in encoder.parameters() if p.requires_grad], lr=config.lr)

    def student(rows: np.ndarray) -> torch.Tensor:
        batch, lengths = pad([ids[i] for i in rows], PAD_ID)
        return encoder(torch.from_numpy(batch), torch.from_numpy(lengths))

    @torch.no_grad()
    def closeness(rows: np.ndarray) -> float:
        if not len(rows):
            return float("nan")
        encoder.eval()
        cos = [(student(rows[b: b + 4096]) * goal[rows[b: b + 4096]]).sum(1) for b in range(0, len(rows), 4096)]
        encoder.train()
        return float(torch.cat(cos).mean())

    history = [{"epoch": 0, "val_cosine": round(closeness(val_rows), 5)}]
    best = (history[0]["val_cosine"], {k: v.clone() for k, v in encoder.state_dict().items()})
    # Batches of similar lengths: little padding.
    lengths = np.array([len(ids[i]) for i in train_rows])
    partner = nearest_neighbours(goal, train_rows) if config.pair_weight else None
    for epoch in range(1, config.epochs + 1):
        started = time.perf_counter()
        shuffled = train_rows[np.argsort(lengths + rng.random(len(lengths)) * 4, kind="stable")]
        batches = [shuffled[b: b + config.batch_size] for b in range(0, len(shuffled), config.batch_size)]
        total = 0.0
        encoder.train()
        for k in tqdm(rng.permutation(len(batches)), desc=f"distill epoch {epoch}", disable=not progress, leave=False):
            rows = batches[k]
            if partner is not None:
                rows = np.concatenate([rows, partner[rows]])
            vectors = student(rows)
            loss = 1 - (vectors * goal[rows]).sum(1).mean()
            if partner is not None:
                target = goal[rows] @ goal[rows].T
                loss = loss + config.pair_weight * F.mse_loss(vectors @ vectors.T, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(rows)
        row = {"epoch": epoch, "loss": round(total / max(len(train_rows), 1), 5), "val_cosine": round(closeness(val_rows), 5),
               "seconds": round(time.perf_counter() - started, 2)}
        history.append(row)
        if progress:
            tqdm.write(f"distill epoch {epoch}: loss {row['loss']:.4f}, held-out cosine to the teacher {row['val_cosine']:.4f}")
        if not cut or row["val_cosine"] > best[0]:
            best = (row["val_cosine"], {k: v.clone() for k, v in encoder.state_dict().items()})
    encoder.load_state_dict(best[1])
    encoder.eval()
    return history


def nearest_neighbours(goal: torch.Tensor, rows: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """For each of ``rows``, the other row of ``rows`` whose teacher vector is closest (exact,
    by blocks; an array indexed by corpus row)."""
    import faiss

    vectors = goal[rows].numpy().astype(np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    partner = np.zeros(len(goal), dtype=np.int64)
    for start in range(0, len(rows), chunk):
        _, found = index.search(vectors[start: start + chunk], 2)
        # The first hit is the text itself, unless an identical vector came first: take the other.
        own = np.arange(start, min(start + chunk, len(rows)))
        partner[rows[own]] = rows[np.where(found[:, 0] == own, found[:, 1], found[:, 0])]
    return partner


def subword_vectorizer(teacher: SiameseModel, texts: Sequence[str], config: StaticConfig):
    """The teacher's own subword tokenizer without its special tokens, its vocabulary extended
    with the corpus's most frequent words that it would cut into pieces (each then gets a vector
    of its own; a word never seen still gets its pieces' vectors)."""
    import json
    from collections import Counter

    from tokenizers import Tokenizer

    from ..text import PretrainedVectorizer

    spec = json.loads(teacher.vectorizer.tokenizer.to_str())
    if spec.get("model", {}).get("type") != "WordPiece":
        raise ConfigError("a subword student needs a teacher with a WordPiece tokenizer (BERT-like: MiniLM, mpnet)")
    spec["post_processor"] = None  # no [CLS]/[SEP]: a static model has no use for them
    spec["padding"] = spec["truncation"] = None
    base = Tokenizer.from_str(json.dumps(spec))
    normalizer, splitter = base.normalizer, base.pre_tokenizer
    counts = Counter(w for t in texts for w, _ in splitter.pre_tokenize_str(normalizer.normalize_str(t)))
    vocab = spec["model"]["vocab"]
    added = [w for w, c in counts.most_common() if c >= max(config.min_frequency, 2) and w not in vocab][: config.extra_words]
    for word in added:
        vocab[word] = len(vocab)
    tok = Tokenizer.from_str(json.dumps(spec))
    if config.max_length:
        tok.enable_truncation(config.max_length)
    return PretrainedVectorizer(tok, teacher.vectorizer.pad_id, teacher.vectorizer.pad_token), len(added)


@torch.inference_mode()
def token_vectors(teacher: SiameseModel, vectorizer, teacher_tokens: int, progress: bool) -> np.ndarray:
    """The teacher's vector of each token alone: ``[CLS] token [SEP]`` for its own tokens (pieces
    such as ``##ing`` included), the word's text for the added words."""
    words = vectorizer.vocabulary()
    special = teacher.vectorizer.tokenizer.encode("", add_special_tokens=True).ids  # [CLS], [SEP]
    out = np.zeros((len(words), teacher.dim), dtype=np.float32)
    ids = np.array([[*special[:1], i, *special[1:]] for i in range(teacher_tokens)], dtype=np.int64)
    lengths = torch.full((256,), ids.shape[1], dtype=torch.long)
    teacher.encoder.eval()
    for start in tqdm(range(0, teacher_tokens, 256), desc="token vectors", disable=not progress, leave=False):
        batch = torch.from_numpy(ids[start: start + 256])
        out[start: start + len(batch)] = teacher.encoder(batch, lengths[: len(batch)]).float().numpy()
    out[teacher.vectorizer.pad_id] = 0
    out[teacher_tokens:] = teacher.encode(words[teacher_tokens:], progress=progress)
    return out
