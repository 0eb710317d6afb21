"""Train the text→emoji model on labelled tweets with the hinge loss over every wrong answer:
each tweet gives one (tweet, right emoji, wrong emoji) triplet per wrong sentiment.

With a frozen sentence encoder as the text side, each tweet is encoded once before the first
epoch and only the projection and the emoji side train (seconds per epoch); ``fine_tune`` also
trains the encoder, at its own small learning rate. After training, the softmax temperature is
fitted on the validation tweets.

A sentiment-aware model also sees, per tweet, a random emoji whose sentiment prior matches the
tweet against one random emoji of each other sentiment and one of unknown sentiment, drawn from
all known emojis, so the emoji side learns to read the prior and suggestions among all 874
emojis follow the sentiment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel

from ..data.glove import embedding_matrix, load_glove
from ..data.vocabulary import PAD_ID, UNK_ID, Vectorizer
from ..errors import ConfigError, DataError
from ..models.losses import hinge_loss
from ..runtime.precision import autocast, resolve_precision
from ..training.batches import batches, seed_everything
from ..training.loop import Trainer
from .sentiment import UNKNOWN, sentiment_classes, sentiment_priors
from .temperature import fit_set_temperature, fit_temperature
from .text_encoders import BILSTM, load_text_encoder, saved_reference
from .text_model import TextEmojiConfig, TextEmojiModel, TextEmojiNetwork
from .tweets import SENTIMENT_EMOJIS, SENTIMENTS, Tweets

# For a label, the other labels (the wrong answers), in order.
WRONG = np.array([[j for j in range(len(SENTIMENTS)) if j != i] for i in range(len(SENTIMENTS))])


@dataclass
class TextEmojiTrainConfig:
    """Optimisation hyper-parameters: 10 epochs, batch 32, word dropout, min_frequency 2, and the final
    weights averaged over the later epochs instead of the single best one (each measured on
    held-out tweets, see docs/benchmarks.md)."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    clipnorm: float = 1.0  # as Keras' clipnorm: each weight's gradient is clipped to this norm
    margin: float = 0.2
    sentiment_weight: float = 0.3  # weight of the all-emoji sentiment triplets (1.0 cost 1.8 points of accuracy)
    word_dropout: float = 0.1  # share of training tokens replaced by [UNK] (a regulariser; 0 = none)
    average_from: int | None = 6  # average the weights of this epoch and the later ones (SWA); None: best epoch on val
    encoder_lr: float = 2e-5  # the sentence encoder's learning rate when fine-tuned
    precision: str = "auto"  # a fine-tuned encoder's forward pass: bf16 autocast where the CPU has it natively
    seed: int = 0
    device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, cuda:N, mps


def emoji_features(codes: np.ndarray, names: list[str], *, sentiment_aware: bool) -> dict[str, np.ndarray]:
    """Per emoji: the code standardised over all emojis and, if ``sentiment_aware``, the sentiment
    prior scaled to the same spread. The three answer emojis' priors are their trained sentiment
    (😈 answers "neutral" here, whatever its use on Twitter). Also returns each emoji's sentiment
    class (for sampling and evaluation) and the rows of the answer emojis."""
    if not np.isfinite(codes).all():
        raise DataError("some emoji codes are inf or NaN: retrain the VAE")
    mean, std = codes.mean(axis=0), codes.std(axis=0) + 1e-6
    standardised = (codes - mean) / std
    missing = [n for n in SENTIMENT_EMOJIS if n not in names]
    if missing:
        raise DataError(f"the emoji set lacks the answer emoji {missing[0]}.png")
    answers = np.array([names.index(n) for n in SENTIMENT_EMOJIS])
    priors = sentiment_priors(names)
    classes = sentiment_classes(priors)
    for label, row in enumerate(answers):
        priors.features[row] = np.eye(len(SENTIMENTS))[label] - priors.overall
        classes[row] = label
    features = standardised
    if sentiment_aware:
        scale = priors.features[priors.occurrences > 0].std(axis=0) + 1e-6
        features = np.concatenate([standardised, priors.features / scale], axis=1)
    return {"features": features.astype(np.float32), "mean": mean, "std": std, "answers": answers, "classes": classes}


def answer_hinge(questions: torch.Tensor, answers: torch.Tensor, labels, margin: float) -> torch.Tensor:
    """Hinge loss of question vectors (n, d) against the answer vectors (3, d): one triplet per
    wrong answer, ``max(0, margin − cos(q, right) + cos(q, wrong))``, averaged."""
    labels = np.asarray(labels)
    return hinge_loss(questions, answers[labels], answers[WRONG[labels]], margin)


def _glove_matrix(vectorizer: Vectorizer, glove_path, dim: int, seed: int):
    """The GloVe-initialised embedding matrix and its coverage summary (None without GloVe)."""
    if glove_path is None:
        return None, None
    vocabulary = vectorizer.vocabulary()
    vectors = load_glove(glove_path, words={w.lower() for w in vocabulary})
    matrix, coverage = embedding_matrix(vocabulary, vectors, dim=dim, seed=seed)
    return matrix, {"covered": coverage.covered, "total": coverage.total, "fraction": coverage.fraction}


def _clip_each(parameters, max_norm: float) -> None:
    for p in parameters:
        if p.grad is not None:
            torch.nn.utils.clip_grad_norm_([p], max_norm)


def train_text_emoji(
    train: Tweets,
    val: Tweets,
    *,
    codes: np.ndarray,
    names: list[str],
    model_config: TextEmojiConfig | None = None,
    config: TextEmojiTrainConfig | None = None,
    glove_path: str | os.PathLike | None = None,
    text_encoder: str = BILSTM,
    text_vectors: Mapping[str, np.ndarray] | None = None,
    progress: bool = True,
) -> TextEmojiModel:
    """Train on ``train`` tweets, keep the epoch with the best accuracy on ``val``; ``codes`` are
    the VAE codes of the emojis ``names`` (all of them become rankable). ``text_encoder``: see
    :mod:`.text_encoders` (``model_config.fine_tune`` trains a sentence encoder too).
    ``text_vectors``: the frozen encoder's vectors of the train and val texts, if already
    computed (the benchmark encodes the tweets once for all its splits)."""
    model_config = model_config or TextEmojiConfig()
    config = config or TextEmojiTrainConfig()
    average_from = _checked(model_config, config, codes, names, text_encoder)
    rng = seed_everything(config.seed)
    started = time.perf_counter()
    model, emojis, coverage = _build(train, codes, names, model_config, config, glove_path, text_encoder)
    model_config, network, encoder = model.config, model.network, model.encoder
    train_vectors, val_inputs = _frozen_vectors(model, train, val, text_vectors)
    encode_seconds = time.perf_counter() - started if train_vectors is not None else 0.0
    tokenizer = model.vectorizer or encoder.vectorizer
    text_lengths = np.array([len(s) for s in tokenizer.encode(train.texts)])  # for length-bucketed batches
    steps = _Steps(model, train, config, emojis, rng, train_vectors)
    # Single epochs swing by a point of accuracy on ~1,000 validation tweets; their average is steadier.
    averaged = AveragedModel(network) if average_from is not None else None
    # A fine-tuned encoder trains beside the network, and the best epoch's weights are both of theirs.
    module = torch.nn.ModuleList([network, encoder.encoder]) if model_config.fine_tune else network

    def validate() -> dict:
        module.eval()
        return validation(model, val, config.margin, val_inputs)

    def average(trainer: Trainer) -> None:
        if trainer.epoch >= average_from:
            averaged.update_parameters(network)

    trainer = Trainer(
        module,
        [steps.optimizer],
        epochs=config.epochs,
        rng=rng,
        progress=progress,
        item="tweet",
        after_backward=lambda: _clip_each(steps.trained, config.clipnorm),
        on_epoch_end=[average] if averaged is not None else [],
    )
    fitted = trainer.fit(
        lambda r: batches(text_lengths, config.batch_size, r),
        steps.loss,
        validate=validate,
        monitor="val_accuracy",
        maximize=True,
    )
    kept = {}
    if averaged is None:
        module.load_state_dict(fitted.best_weights)
    else:  # the average of the network's last epochs; a fine-tuned encoder keeps its last weights
        network.load_state_dict(averaged.module.state_dict())
        kept = {
            "averaged_epochs": [average_from, config.epochs],
            "val_accuracy": validation(model, val, config.margin, val_inputs)["val_accuracy"],
        }
    network.eval()
    model.info["calibration"] = _temperatures(model, val, val_inputs, emojis["classes"])
    model.info["training"] = {
        "config": asdict(config),
        "history": fitted.history,
        "best_epoch": fitted.best_epoch,
        "val_accuracy": fitted.best_score,
        **kept,
        "train_tweets": len(train),
        "val_tweets": len(val),
        "glove": coverage,
        "text_encoder": {
            "spec": text_encoder,
            "saved_as": model_config.text_encoder,
            "dim": model_config.text_dim,
            "fine_tuned": model_config.fine_tune,
            "encode_seconds": encode_seconds,
        },
        "seconds": time.perf_counter() - started,
        "answers": dict(zip(SENTIMENTS, SENTIMENT_EMOJIS, strict=True)),
        "sentiment_classes": {s: int((emojis["classes"] == i).sum()) for i, s in enumerate(SENTIMENTS)}
        | {"unknown": int((emojis["classes"] == UNKNOWN).sum())},
    }
    return model


def _frozen_vectors(model: TextEmojiModel, train: Tweets, val: Tweets, text_vectors: Mapping[str, np.ndarray] | None):
    """A frozen sentence encoder's vectors of the training tweets and the validation inputs, each
    tweet encoded once (they do not change); None, None when the text side trains."""
    if model.encoder is None or model.config.fine_tune:
        return None, None

    def encoded(texts: list[str]) -> torch.Tensor:
        vectors = np.stack([text_vectors[t] for t in texts]) if text_vectors else model.encoder.encode(texts)
        return torch.from_numpy(vectors).to(model.device)

    return encoded(train.texts), (encoded(val.texts),)


def _checked(
    model_config: TextEmojiConfig, config: TextEmojiTrainConfig, codes, names, text_encoder: str
) -> int | None:
    """Refuse settings that cannot train; the first averaged epoch (None: keep the best epoch)."""
    if config.epochs < 1 or config.batch_size < 1:
        raise ConfigError("epochs and batch_size must be at least 1")
    if config.average_from is not None and config.average_from < 1:
        raise ConfigError("average_from must be at least 1 (or None for the best epoch on validation)")
    if model_config.fine_tune and text_encoder == BILSTM:
        raise ConfigError("--fine-tune is for sentence encoders: the bilstm text side always trains")
    if codes.shape != (len(names), model_config.code_dim):
        raise ConfigError(
            f"codes are {codes.shape}, expected ({len(names)}, {model_config.code_dim}): "
            f"was the VAE trained with --latent-dim {model_config.code_dim}?"
        )
    # Fewer epochs than average_from (small runs): the last epoch alone.
    return None if config.average_from is None else min(config.average_from, config.epochs)


def _build(
    train: Tweets, codes, names, model_config: TextEmojiConfig, config: TextEmojiTrainConfig, glove_path, text_encoder
):
    """The untrained model (its text side: a vocabulary and GloVe start for the bilstm, else a
    sentence encoder), the emojis' features, and the GloVe coverage."""
    vectorizer = encoder = matrix = coverage = None
    if text_encoder == BILSTM:
        vectorizer = Vectorizer.fit(
            train.texts,
            max_vocab=model_config.max_vocab,
            min_frequency=model_config.min_frequency,
            lowercase=model_config.lowercase,
            max_length=model_config.max_length,
        )
        matrix, coverage = _glove_matrix(vectorizer, glove_path, model_config.embedding_dim, config.seed)
    else:
        encoder = load_text_encoder(text_encoder)
        model_config = replace(
            model_config,
            text_dim=encoder.dim,
            text_encoder=saved_reference(text_encoder, fine_tuned=model_config.fine_tune),
        )
    emojis = emoji_features(codes, names, sentiment_aware=model_config.sentiment_aware)
    network = TextEmojiNetwork(model_config, vectorizer.vocab_size if vectorizer else 0, len(names), matrix)
    network.emoji_features.copy_(torch.from_numpy(emojis["features"]))
    network.code_mean.copy_(torch.from_numpy(emojis["mean"]))
    network.code_std.copy_(torch.from_numpy(emojis["std"]))
    network.answers.copy_(torch.from_numpy(emojis["answers"]))
    model = TextEmojiModel(vectorizer, network, model_config, names, encoder=encoder).to(config.device)
    return model, emojis, coverage


class _Steps:
    """A batch of tweets → the loss: the answer hinge, plus (sentiment-aware) a hinge of a right
    emoji over one of each other sentiment and one of unknown sentiment (a known match should
    outrank an emoji nobody has measured); the optimizer over what trains."""

    def __init__(
        self, model: TextEmojiModel, train: Tweets, config: TextEmojiTrainConfig, emojis: dict, rng, train_vectors
    ):
        self.model, self.train, self.config, self.rng, self.train_vectors = model, train, config, rng, train_vectors
        self.pools = [np.flatnonzero(emojis["classes"] == label) for label in range(len(SENTIMENTS))]
        self.unknown = np.flatnonzero(emojis["classes"] == UNKNOWN)
        groups = [{"params": list(model.network.parameters()), "lr": config.lr}]
        fine_tune = model.config.fine_tune
        if fine_tune:
            groups.append({"params": list(model.encoder.encoder.parameters()), "lr": config.encoder_lr})
        self.optimizer = torch.optim.Adam(groups)
        self.trained = [p for group in groups for p in group["params"]]
        precision = resolve_precision(config.precision, model.device)
        self.autocast = autocast(precision, model.device.type) if fine_tune else None

    def text_side(self, rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        if self.train_vectors is not None:  # a frozen encoder's vectors
            return (self.train_vectors[torch.from_numpy(rows)],)
        ids, lengths = self.model.text_batch([self.train.texts[i] for i in rows])
        if self.model.encoder is not None:  # fine-tuning: the encoder's vectors, with gradients
            with self.autocast():
                return (self.model.encoder.encoder(ids, lengths).float(),)
        if self.config.word_dropout > 0:
            dropped = (torch.rand(ids.shape, device=ids.device) < self.config.word_dropout) & (ids != PAD_ID)
            ids = ids.masked_fill(dropped, UNK_ID)
        return ids, lengths

    def _wrong(self, label: int) -> list[int]:
        """One emoji of each other sentiment, and one of unknown sentiment when there are any."""
        drawn = [self.rng.choice(self.pools[w]) for w in WRONG[label]]
        return drawn + ([self.rng.choice(self.unknown)] if len(self.unknown) else [])

    def loss(self, rows: np.ndarray) -> torch.Tensor:
        network, config, rng = self.model.network, self.config, self.rng
        labels = self.train.labels[rows]
        questions = network.embed_texts(*self.text_side(rows))
        answers = network.embed_features(network.emoji_features[network.answers])
        loss = answer_hinge(questions, answers, labels, config.margin)
        if not (self.model.config.sentiment_aware and config.sentiment_weight > 0):
            return loss
        right = np.array([rng.choice(self.pools[label]) for label in labels])
        wrong = np.array([self._wrong(label) for label in labels])
        emoji_vectors = network.embed_features(
            network.emoji_features[torch.from_numpy(np.concatenate([right, wrong.ravel()]))]
        )
        return loss + config.sentiment_weight * hinge_loss(
            questions,
            emoji_vectors[: len(rows)],
            emoji_vectors[len(rows) :].view(len(rows), wrong.shape[1], -1),
            config.margin,
        )


def _temperatures(model: TextEmojiModel, val: Tweets, val_inputs, classes: np.ndarray) -> dict:
    """Softmax temperatures fitted on the validation tweets: over the answer emojis, and over
    every known emoji (mass on the emojis of the tweet's sentiment)."""
    questions, answer_vectors = question_and_answer_vectors(model, val, val_inputs)
    everything = (questions @ model.embed_emojis().T).cpu().numpy()
    return fit_temperature((questions @ answer_vectors.T).cpu().numpy(), val.labels) | {
        "fitted_on": "validation tweets",
        "over": "the answer emojis",
        "suggestions": fit_set_temperature(everything, classes[None, :] == val.labels[:, None])
        | {"over": "every known emoji", "target": "mass on the emojis of the tweet's sentiment"},
    }


@torch.no_grad()
def question_and_answer_vectors(model: TextEmojiModel, tweets: Tweets, inputs: tuple[torch.Tensor, ...] | None = None):
    """Unit vectors of the tweets and of the 3 answer emojis; ``inputs``: the tweets' text-side
    inputs if already computed (a frozen encoder's vectors)."""
    if inputs is None:
        questions = model.embed_texts(tweets.texts)
    else:
        model.network.eval()
        questions = torch.nn.functional.normalize(model.network.embed_texts(*inputs), dim=-1)
    return questions, model.embed_emojis(model.network.emoji_features[model.network.answers])


@torch.no_grad()
def validation(
    model: TextEmojiModel, val: Tweets, margin: float, inputs: tuple[torch.Tensor, ...] | None = None
) -> dict:
    """Hinge loss over every wrong answer, and 3-way accuracy, on held-out tweets."""
    questions, answers = question_and_answer_vectors(model, val, inputs)
    predictions = (questions @ answers.T).argmax(1).cpu().numpy()
    return {
        "val_loss": answer_hinge(questions, answers, val.labels, margin).item(),
        "val_accuracy": float(np.mean(predictions == val.labels)),
    }
