"""How good the text→emoji model is on held-out tweets: 3-way accuracy (the answer emoji with the
highest cosine), per-class recall and the confusion matrix, beside the majority class and a
TF-IDF + logistic regression classifier; and, over all known emojis, how often the top-k
suggestions share the tweet's sentiment.

A trained model records the tweets it learnt from (file, SHA-256, split), so that
:func:`evaluate_file` can rebuild its training tweets for the baseline and, on the model's own
file, score only the held-out test part.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, recall_score
from sklearn.pipeline import make_pipeline

from ..errors import DataError, ModelError
from ..models.pretrained import file_sha256
from .sentiment import sentiment_classes, sentiment_priors
from .temperature import log_loss, top_label_ece
from .text_model import TextEmojiModel
from .tweets import SENTIMENTS, Tweets, read_tweets, split_tweets


def classification_report(labels: np.ndarray, predictions: np.ndarray) -> dict:
    """Accuracy, recall per sentiment and the confusion matrix (rows: true, columns: predicted)."""
    classes = list(range(len(SENTIMENTS)))
    recall = recall_score(labels, predictions, labels=classes, average=None, zero_division=0)
    return {
        "accuracy": float(np.mean(labels == predictions)),
        "recall": dict(zip(SENTIMENTS, map(float, recall))),
        "confusion_matrix": confusion_matrix(labels, predictions, labels=classes).tolist(),
        "n": int(len(labels)),
    }


def majority_baseline(train: Tweets, test: Tweets) -> dict:
    """Always answer the most frequent sentiment of the training tweets."""
    majority = int(np.bincount(train.labels, minlength=len(SENTIMENTS)).argmax())
    return classification_report(test.labels, np.full(len(test), majority))


def tfidf_baseline(train: Tweets, test: Tweets, *, seed: int = 0) -> dict:
    """Word 1–2-gram TF-IDF (sublinear tf) → multinomial logistic regression."""
    classifier = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1),
        LogisticRegression(C=10.0, max_iter=2000, random_state=seed),
    )
    classifier.fit(train.texts, train.labels)
    return classification_report(test.labels, classifier.predict(test.texts))


def sentiment_agreement(
    model: TextEmojiModel, tweets: Tweets, *, k: int = 5, scores: np.ndarray | None = None
) -> float:
    """Share of the top-``k`` emojis, ranked among all the model's emojis, whose sentiment class
    (from the Emoji Sentiment Ranking) is the tweet's sentiment. Emojis of unknown sentiment count
    as disagreeing, so a model that ignores sentiment scores low whatever it suggests."""
    classes = sentiment_classes(sentiment_priors(model.names))
    scores = model.scores(tweets.texts) if scores is None else scores
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return float(np.mean(classes[top] == tweets.labels[:, None]))


def evaluate_text_emoji(model: TextEmojiModel, test: Tweets, *, k: int = 5) -> dict:
    """Accuracy, recall, confusion matrix, top-``k`` sentiment agreement over all emojis and, with
    a fitted temperature, the log-loss and ECE of the 3-way probabilities."""
    scores = model.scores(test.texts)
    answers = scores[:, model.answer_rows()]
    report = classification_report(test.labels, answers.argmax(axis=1))
    report[f"sentiment_agreement_at_{k}"] = sentiment_agreement(model, test, k=k, scores=scores)
    if model.temperature is not None:
        report["calibration"] = {
            "log_loss": log_loss(answers, test.labels, model.temperature),
            "ece": top_label_ece(model.probabilities(answers), test.labels),
        }
    if model.suggestion_temperature is not None:
        report["suggestions"] = suggestion_summary(model, scores, test.labels, k=k)
    return report


def suggestion_summary(model: TextEmojiModel, scores: np.ndarray, labels: np.ndarray, *, k: int = 5) -> dict:
    """How the suggestion probabilities over all emojis look, averaged over tweets: the top one,
    the top-``k`` together, the median emoji, and the mass on the emojis of the tweet's sentiment."""
    probs = model.suggestion_probabilities(scores)
    ranked = -np.sort(-probs, axis=1)
    classes = sentiment_classes(sentiment_priors(model.names))
    classes[model.answer_rows()] = np.arange(len(SENTIMENTS))
    return {
        "top1": float(ranked[:, 0].mean()),
        f"top{k}_total": float(ranked[:, :k].sum(axis=1).mean()),
        "median_emoji": float(np.median(probs, axis=1).mean()),
        "mass_on_tweet_sentiment": float((probs * (classes[None, :] == labels[:, None])).sum(axis=1).mean()),
    }


def data_record(
    path: str | os.PathLike, *, seed: int, test_fraction: float, val_fraction: float, limit: int | None = None
) -> dict:
    """What a model keeps about its tweets: enough to split them again the same way."""
    path = Path(path)
    return {
        "path": str(path.resolve()),
        "sha256": file_sha256(path),
        "limit": limit,
        "split": {"seed": seed, "test_fraction": test_fraction, "val_fraction": val_fraction},
    }


def split_recorded(record: dict, tweets: Tweets) -> tuple[Tweets, Tweets, Tweets]:
    """(test, validation, train) tweets of a file as the model recorded splitting it."""
    if record.get("limit"):
        tweets = tweets.subset(range(min(record["limit"], len(tweets))))
    split = record["split"]
    return tuple(split_tweets(tweets, [split["test_fraction"], split["val_fraction"]], seed=split["seed"]))


def train_and_evaluate(
    tweets: Tweets,
    *,
    codes: np.ndarray,
    names: list[str],
    model_config=None,
    config=None,
    glove_path=None,
    test_fraction: float = 0.2,
    val_fraction: float = 0.08,
    text_encoder: str = "bilstm",
    text_vectors=None,
    data: dict | None = None,
    progress: bool = False,
) -> tuple[TextEmojiModel, dict]:
    """Split the tweets (stratified: test, validation, train), train, and report on the test part
    beside the baselines. The report is also kept in ``model.info``; ``data`` (a
    :func:`data_record` of the tweets' file) too."""
    from .text_model_train import TextEmojiTrainConfig, train_text_emoji

    config = config or TextEmojiTrainConfig()
    test, val, train = split_tweets(tweets, [test_fraction, val_fraction], seed=config.seed)
    model = train_text_emoji(
        train,
        val,
        codes=codes,
        names=names,
        model_config=model_config,
        config=config,
        glove_path=glove_path,
        text_encoder=text_encoder,
        text_vectors=text_vectors,
        progress=progress,
    )
    if data is not None:
        model.info["data"] = data
    model.info["test"] = evaluate_text_emoji(model, test)
    model.info["baselines"] = {
        "majority": majority_baseline(train, test),
        "tfidf_logreg": tfidf_baseline(train, test, seed=config.seed),
    }
    info = model.info["training"]
    report = {
        "train_tweets": info["train_tweets"],
        "val_tweets": info["val_tweets"],
        "test": model.info["test"],
        "baselines": model.info["baselines"],
        "best_epoch": info["best_epoch"],
        "averaged_epochs": info.get("averaged_epochs"),
        "val_accuracy": info["val_accuracy"],
        "history": info["history"],
        "seconds": info["seconds"],
        "glove": info["glove"],
        "text_encoder": info["text_encoder"],
        "calibration": model.info["calibration"],
    }
    return model, report


def training_tweets(record: dict | None, *, folder: str | os.PathLike = "the model") -> tuple[Tweets, Tweets]:
    """The (test, train) parts of a model's recorded tweet file; errors if it is gone or changed."""
    if not record:
        raise ModelError(f"{folder}: the model does not record its training tweets (retrain it with this version)")
    path = Path(record["path"])
    if not path.is_file():
        raise DataError(f"{path}: the model's training tweets are missing (needed for the TF-IDF baseline)")
    if file_sha256(path) != record["sha256"]:
        raise DataError(f"{path}: changed since the model was trained on it (SHA-256 differs)")
    test, _, train = split_recorded(record, read_tweets(path))
    return test, train


def evaluate_file(model_dir: str | os.PathLike, data: str | os.PathLike | None = None, *, device: str = "auto") -> dict:
    """Evaluate a saved model on a labelled tweet file (default: its own file, whose held-out test
    part is then the one scored) beside the baselines trained on the model's training tweets.
    The tweet files are checked before the model (and its sentence encoder) is loaded."""
    from .folder import read_config
    from .text_model import FORMAT, TextEmojiConfig

    _, raw = read_config(model_dir, fmt=FORMAT, config_class=TextEmojiConfig, what="emoji text model")
    record = (raw.get("info") or {}).get("data")
    own_test, train = training_tweets(record, folder=model_dir)
    path = Path(data) if data is not None else Path(record["path"])
    own = path.is_file() and file_sha256(path) == record["sha256"]
    test = own_test if own else read_tweets(path)
    model = TextEmojiModel.load(model_dir, device=device)
    return {
        "model": str(model_dir),
        "data": str(path),
        "scored": "the model's held-out test split of its own training file" if own else "every tweet of the file",
        "train_tweets": len(train),
        "emojis": len(model.names),
        "text_encoder": model.config.text_encoder,
        **evaluate_text_emoji(model, test),
        "baselines": {
            "majority": majority_baseline(train, test),
            "tfidf_logreg": tfidf_baseline(train, test, seed=record["split"]["seed"]),
        },
    }
