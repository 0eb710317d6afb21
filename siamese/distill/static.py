"""A static student distilled from a sentence encoder: one vector per token, pooled by the bag of
words (:class:`siamese.models.encoders.BagOfWordsEncoder`), so it encodes at bag-of-words speed.

Two steps, after model2vec (Tulkens & van Dongen 2024) and its tokenlearn recipe:

1. **Start** each token's vector at the teacher's own embedding of that token alone, less the
   mean of the corpus's tokens, on their main directions (PCA, as model2vec), and each token's
   weight at its SIF weight ``a / (a + p(token))`` from the corpus. With ``epochs=0`` this is the
   student, and the teacher never reads a corpus text (model2vec's recipe and cost).
   The tokens are the teacher's own subwords (WordPiece) plus the corpus's most frequent words
   that the teacher cuts into pieces, each then with a vector of its own; a word never seen still
   gets its pieces' vectors. (``vocabulary="words"``: a word vocabulary learned from the corpus,
   for teachers without WordPiece; on validation it was worse: Quora 0.76 vs 0.82.)
2. **Train** the vectors and weights so that the student's vector of each corpus text points
   where the teacher's (projected) vector points (loss ``1 − cos(student, teacher)``), and so that
   within a batch the student finds the same texts close as the teacher does (a KL term on the
   softmax of the batch's cosines, after relational distillation, Park et al. 2019). The teacher
   is run once per distinct text; the student never sees a label here.

Labelled pairs can then fine-tune the student like any bag-of-words model
(:func:`siamese.training.bi_encoder.train` with ``initial=``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from ..config.static import StaticConfig
from ..data.vocabulary import PAD_ID, UNK_ID, PretrainedVectorizer, Vectorizer, pad
from ..errors import ConfigError, DataError
from ..io.progress import tqdm
from ..models.encoders import BagOfWordsEncoder
from ..models.siamese import ModelConfig, SiameseModel
from ..runtime.devices import host_bytes, to_device
from ..runtime.precision import autocast
from ..training.optim import LazyAdam
from .heartbeat import Heartbeat


def distill_static(
    teacher: SiameseModel,
    texts: Sequence[str],
    config: StaticConfig | None = None,
    *,
    teacher_info: dict | None = None,
    targets: np.ndarray | None = None,
    progress: bool = True,
    beat: Heartbeat | None = None,
) -> SiameseModel:
    """A bag-of-words :class:`SiameseModel` whose cosines imitate ``teacher``'s (a cosine model)
    on ``texts`` (the corpus). ``targets``: the teacher's vectors of the distinct non-empty
    texts in first-seen order, if already computed. Past ``config.corpus_sample`` distinct texts, a
    seeded sample of them (and of ``targets``) is what the student learns from. The threshold is the
    default: choose one on validation pairs afterwards. ``beat``: the heartbeat that reports each step (see
    :mod:`.heartbeat`)."""
    beat = beat or Heartbeat(None)
    config = config or StaticConfig()
    config.check()
    if teacher.config.head != "cosine":
        raise ConfigError(f"a teacher must be a cosine model (its head is {teacher.config.head!r})")
    texts = list(dict.fromkeys(t for t in texts if t.strip()))
    if len(texts) < 10:
        raise DataError(f"the distillation corpus has {len(texts)} distinct texts; at least 10 are needed")
    if config.dim > teacher.dim:
        raise ConfigError(f"dim {config.dim} is wider than the teacher's vectors ({teacher.dim})")
    if targets is not None and np.shape(targets) != (len(texts), teacher.dim):
        raise ValueError(f"targets have shape {np.shape(targets)}, expected ({len(texts)}, {teacher.dim})")
    distinct = len(texts)
    if config.corpus_sample and distinct > config.corpus_sample:
        rows = np.sort(np.random.default_rng(config.seed).choice(distinct, config.corpus_sample, replace=False))
        texts = [texts[i] for i in rows]
        targets = None if targets is None else np.asarray(targets)[rows]
    read = f" and {len(texts):,} texts" if config.epochs else ""  # epochs 0: the tokens alone
    started = time.perf_counter()
    vectorizer, token_table = _vocabulary(teacher, texts, config, progress, beat, read)
    beat.stage("student: tokenizing the corpus", len(texts))
    ids = vectorizer.encode(texts)  # once: the SIF counts and every training batch come from these
    counts = np.bincount(np.concatenate(ids), minlength=vectorizer.vocab_size)
    blank = [PAD_ID] + ([UNK_ID] if config.vocabulary == "words" else [])  # no vector: no evidence either way
    mean, projection = token_directions(token_table, counts, config.dim, blank)
    if config.epochs and targets is None:
        beat.stage("teacher: corpus texts", len(texts))
        targets = _encode(teacher, texts, progress, beat)
    teacher_seconds = time.perf_counter() - started
    model_config = ModelConfig(
        encoder="bow",
        dim=config.dim,
        head="cosine",
        loss="cosent",
        max_vocab=config.max_vocab,
        max_length=config.max_length,
        seed=config.seed,
        tokenizer=config.vocabulary,
        encoder_options={"embedding_dim": config.dim},
    )
    encoder = BagOfWordsEncoder(
        vectorizer.vocab_size,
        embedding_dim=config.dim,
        word_counts=counts,
        embeddings=(token_table - mean) @ projection,
    )
    with torch.no_grad():
        encoder.embedding.weight[blank] = 0
    model = SiameseModel(vectorizer, encoder, model_config).to(
        teacher.device
    )  # the student learns where the teacher ran
    if config.epochs:
        # The teacher's own sentence vectors on those directions, not centred: the student then scores on the
        # teacher's scale, where a threshold (dedupe's 0.9, a cascade's floor) means what it means for the teacher.
        goal = to_device(torch.from_numpy(np.asarray(targets, dtype=np.float32) @ projection), model.device)
        history = fit_to_teacher(model, ids, F.normalize(goal, dim=-1), config, progress, beat)
    else:  # model2vec's recipe: the teacher never reads a corpus text
        history = [{"epoch": 0, "val_loss": None, "val_cosine": None, "kept": True}]
    model.info = {
        "distillation": {
            "kind": "static",
            **asdict(config),
            "teacher": teacher_info or {},
            "corpus_texts": len(texts),
            "corpus_distinct": distinct,
            "tokens": vectorizer.vocab_size,
            "teacher_seconds": round(teacher_seconds, 1),
            "history": history,
            "seconds": round(time.perf_counter() - started, 1),
        }
    }
    return model


def _vocabulary(
    teacher: SiameseModel, texts: list[str], config: StaticConfig, progress: bool, beat: Heartbeat, read: str
) -> tuple[Vectorizer | PretrainedVectorizer, np.ndarray]:
    """The student's tokens (see :func:`subword_vectorizer`; or a word vocabulary of the corpus) and the
    teacher's vector of each, one row per token id."""
    log = tqdm.write if progress else (lambda *_: None)
    if config.vocabulary == "subwords":
        vectorizer, added = subword_vectorizer(teacher, texts, config)
        tokens = vectorizer.vocab_size
        log(f"distill: teacher vectors of {tokens:,} tokens ({added:,} of them corpus words){read}")
        return vectorizer, token_vectors(teacher, vectorizer, tokens - added, progress, beat)
    words_vectorizer = Vectorizer.fit(texts, max_vocab=config.max_vocab, lowercase=True, max_length=config.max_length)
    words = words_vectorizer.vocabulary()
    log(f"distill: teacher vectors of {len(words) - 2:,} words{read}")
    token_table = np.zeros((len(words), teacher.dim), dtype=np.float32)
    beat.stage("teacher: corpus words", len(words) - 2)
    token_table[2:] = _encode(teacher, words[2:], progress, beat)  # [PAD] and [UNK] are not words
    return words_vectorizer, token_table


def token_directions(
    table: np.ndarray, counts: np.ndarray, dim: int, blank: Sequence[int] = (PAD_ID,)
) -> tuple[np.ndarray, np.ndarray]:
    """The mean of the corpus's token vectors (the rows of ``table`` with ``counts``, less the
    ``blank`` ones) and their ``dim`` main directions, as model2vec's PCA: a start of
    ``(table - mean) @ directions``. The mean is a direction every token shares; left in, it
    pulls every text towards every other (validation AUC/ρ mean, token vectors alone: 0.677 with it,
    0.706 without, model2vec's own 0.709; trained on 16,000 texts, 0.728 and 0.735: docs/benchmarks.md)."""
    seen = counts > 0
    seen[list(blank)] = False
    rows = table[seen] if seen.sum() > dim else table  # a tiny corpus: every token's vector
    mean = rows.mean(0)
    _, _, vt = np.linalg.svd(rows - mean, full_matrices=False)
    return mean.astype(np.float32), vt[:dim].T.astype(np.float32)


def relational_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL divergence, averaged over the batch's texts, from each text's softmax over its cosines to
    the batch's texts (itself included) under the teacher to the same under the student. Rows: unit vectors."""
    target = F.log_softmax(teacher @ teacher.T / temperature, dim=1)
    guess = F.log_softmax(student @ student.T / temperature, dim=1)
    return F.kl_div(guess, target, log_target=True, reduction="batchmean")


def fit_to_teacher(
    model: SiameseModel,
    ids: list[np.ndarray],
    goal: torch.Tensor,
    config: StaticConfig,
    progress: bool,
    beat: Heartbeat | None = None,
) -> list[dict]:
    """Lazy Adam on the token vectors and weights, on the corpus texts' token ``ids``: loss
    ``1 − cos(student, teacher)`` plus ``config.relational`` × :func:`relational_loss`. Keeps the
    weights of the epoch of lowest loss on the held-out texts (also reported: their mean cosine to
    the teacher). Returns one row per epoch (epoch 0: the start); the kept one has ``kept: True``."""
    beat = beat or Heartbeat(None)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(ids))
    cut = int(round(config.val_fraction * len(ids)))
    val_rows, train_rows = order[:cut], order[cut:]
    encoder = model.encoder
    optimizer = LazyAdam([p for p in encoder.parameters() if p.requires_grad], lr=config.lr)

    def student(rows: np.ndarray) -> torch.Tensor:
        batch, lengths = pad([ids[i] for i in rows], model.vectorizer.pad_id)
        return encoder(
            to_device(torch.from_numpy(batch), model.device), to_device(torch.from_numpy(lengths), model.device)
        )

    def losses(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(the batch's loss, its texts' cosines to the teacher)"""
        vectors, target = student(rows), goal[rows]
        cos = (vectors * target).sum(1)
        loss = 1 - cos.mean()
        if config.relational:
            loss = loss + config.relational * relational_loss(vectors, target, config.temperature)
        return loss, cos

    @torch.no_grad()
    def held_out() -> dict:
        if not len(val_rows):
            return {"val_loss": None, "val_cosine": None}
        encoder.eval()
        # Batches of the training size: the relational term depends on how many texts a batch holds.
        parts = [losses(val_rows[b : b + config.batch_size]) for b in range(0, len(val_rows), config.batch_size)]
        encoder.train()
        loss = sum(float(part_loss) * len(c) for part_loss, c in parts) / len(val_rows)
        return {"val_loss": round(loss, 5), "val_cosine": round(float(torch.cat([c for _, c in parts]).mean()), 5)}

    history = [{"epoch": 0, **held_out()}]
    best = (history[0]["val_loss"], {k: v.clone() for k, v in encoder.state_dict().items()}, 0)
    lengths = np.array([len(ids[i]) for i in train_rows])
    for epoch in range(1, config.epochs + 1):
        started = time.perf_counter()
        # Batches of texts of similar length (little padding), visited in random order.
        shuffled = train_rows[np.argsort(lengths + rng.random(len(lengths)) * 4, kind="stable")]
        batches = [shuffled[b : b + config.batch_size] for b in range(0, len(shuffled), config.batch_size)]
        total = torch.zeros((), device=model.device)  # summed on the device, read once per epoch
        encoder.train()
        beat.stage(f"student: epoch {epoch} of {config.epochs}, batches", len(batches))
        for k in tqdm(rng.permutation(len(batches)), desc=f"distill epoch {epoch}", disable=not progress, leave=False):
            rows = batches[k]
            loss, _ = losses(rows)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(rows)
            beat.advance(1)
        row = {
            "epoch": epoch,
            "loss": round(float(total) / max(len(train_rows), 1), 5),
            **held_out(),
            "seconds": round(time.perf_counter() - started, 2),
        }
        history.append(row)
        if progress:
            tqdm.write(
                f"distill epoch {epoch}: loss {row['loss']:.4f}, held-out loss {row['val_loss']}, "
                f"held-out cosine to the teacher {row['val_cosine']}"
            )
        if row["val_loss"] is None or row["val_loss"] < best[0]:
            best = (row["val_loss"], {k: v.clone() for k, v in encoder.state_dict().items()}, epoch)
    encoder.load_state_dict(best[1])
    history[best[2]]["kept"] = True
    encoder.eval()
    return history


def subword_vectorizer(
    teacher: SiameseModel, texts: Sequence[str], config: StaticConfig
) -> tuple[PretrainedVectorizer, int]:
    """The teacher's own WordPiece tokenizer without its special tokens, its vocabulary extended
    with the corpus's most frequent words that it would cut into pieces; and how many were added.
    WordPiece matches the longest vocabulary entry first, so an added word is then one token."""
    spec = json.loads(teacher.vectorizer.tokenizer.to_str())
    if spec.get("model", {}).get("type") != "WordPiece":
        raise ConfigError(
            "vocabulary 'subwords' needs a teacher with a WordPiece tokenizer (BERT-like, e.g. minilm, "
            "mpnet); use vocabulary 'words' with this one"
        )
    spec["post_processor"] = None  # no [CLS]/[SEP]: in a mean of token vectors they only blur
    spec["padding"] = spec["truncation"] = None
    base = Tokenizer.from_str(json.dumps(spec))
    normalizer, splitter = base.normalizer, base.pre_tokenizer
    counts = Counter(
        w for t in texts for w, _ in splitter.pre_tokenize_str(normalizer.normalize_str(t) if normalizer else t)
    )
    vocab = spec["model"]["vocab"]
    added = [w for w, c in counts.most_common() if c >= 2 and w not in vocab][: config.extra_words]
    for word in added:
        vocab[word] = len(vocab)
    tok = Tokenizer.from_str(json.dumps(spec))
    if config.max_length:
        tok.enable_truncation(config.max_length)
    return PretrainedVectorizer(tok, teacher.vectorizer.pad_id, teacher.vectorizer.pad_token), len(added)


@torch.inference_mode()
def token_vectors(
    teacher: SiameseModel,
    vectorizer: PretrainedVectorizer,
    teacher_tokens: int,
    progress: bool,
    beat: Heartbeat | None = None,
) -> np.ndarray:
    """The teacher's vector of each token alone: ``[CLS] token [SEP]`` for its own tokens (pieces
    such as ``##ing`` included, fed as ids), the word's own text for the added words."""
    beat = beat or Heartbeat(None)
    words = vectorizer.vocabulary()
    out = np.zeros((len(words), teacher.dim), dtype=np.float32)
    beat.stage("teacher: its own tokens", teacher_tokens)
    out[:teacher_tokens] = _own_token_vectors(teacher, teacher_tokens, progress, beat)
    out[teacher.vectorizer.pad_id] = 0
    if teacher_tokens < len(words):
        beat.stage("teacher: corpus words", len(words) - teacher_tokens)
        out[teacher_tokens:] = _encode(teacher, words[teacher_tokens:], progress, beat)
    return out


def _encode(teacher: SiameseModel, texts: list[str], progress: bool, beat: Heartbeat) -> np.ndarray:
    """The teacher's vectors of ``texts``: at once behind a bar, or a chunk at a time for the heartbeat."""
    if beat.every is None:
        return teacher.encode(texts, progress=progress)
    out = np.empty((len(texts), teacher.dim), dtype=np.float32)
    for start in range(0, len(texts), 8192):
        out[start : start + 8192] = teacher.encode(texts[start : start + 8192])
        beat.advance(len(out[start : start + 8192]))
    return out


_LAST_TEACHER: dict = {}  # the last teacher's own token vectors, by what they depend on


@torch.inference_mode()
def _own_token_vectors(
    teacher: SiameseModel, teacher_tokens: int, progress: bool, beat: Heartbeat | None = None
) -> np.ndarray:
    """``[CLS] token [SEP]`` through the teacher for each of its first ``teacher_tokens`` ids: ~30,000
    short inputs, half a minute on 2 cores, so kept for the next student of the same teacher in
    this process (a sweep over --dim or --epochs pays it once)."""
    special = teacher.vectorizer.tokenizer.encode("", add_special_tokens=True).ids  # e.g. [CLS], [SEP]
    precision = teacher.encoding_precision()
    h = hashlib.sha256(repr((special, teacher_tokens, precision)).encode())
    for name, tensor in sorted(teacher.encoder.state_dict().items()):
        h.update(name.encode())
        h.update(host_bytes(tensor))
    key = h.hexdigest()
    if key in _LAST_TEACHER:
        return _LAST_TEACHER[key]
    ids = np.array([[*special[:1], i, *special[1:]] for i in range(teacher_tokens)], dtype=np.int64)
    device = teacher.device
    lengths = torch.full((256,), ids.shape[1], dtype=torch.long, device=device)
    vectors = np.zeros((teacher_tokens, teacher.dim), dtype=np.float32)
    teacher.encoder.eval()
    with autocast(precision, device.type)():
        for start in tqdm(range(0, teacher_tokens, 256), desc="token vectors", disable=not progress, leave=False):
            batch = to_device(torch.from_numpy(ids[start : start + 256]), device)
            vectors[start : start + len(batch)] = teacher.encoder(batch, lengths[: len(batch)]).float().cpu().numpy()
            if beat is not None:
                beat.advance(len(batch))
    vectors.setflags(write=False)
    _LAST_TEACHER.clear()
    _LAST_TEACHER[key] = vectors
    return vectors
