"""How good the text→emoji model is on held-out tweets: 3-way accuracy (the answer emoji with the
highest cosine), per-class recall and the confusion matrix, beside the majority class and a
TF-IDF + logistic regression classifier; and, over all known emojis, how often the top-k
suggestions share the tweet's sentiment."""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, recall_score
from sklearn.pipeline import make_pipeline

from .sentiment import sentiment_classes, sentiment_priors
from .sqam import EmojiSQAM
from .tweets import SENTIMENTS, Tweets, split_tweets


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
    classifier = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1),
                               LogisticRegression(C=10.0, max_iter=2000, random_state=seed))
    classifier.fit(train.texts, train.labels)
    return classification_report(test.labels, classifier.predict(test.texts))


def sentiment_agreement(model: EmojiSQAM, tweets: Tweets, *, k: int = 5) -> float:
    """Share of the top-``k`` emojis, ranked among all the model's emojis, whose sentiment class
    (from the Emoji Sentiment Ranking) is the tweet's sentiment. Emojis of unknown sentiment count
    as disagreeing, so a model that ignores sentiment scores low whatever it suggests."""
    classes = sentiment_classes(sentiment_priors(model.names))
    top = np.argsort(-model.scores(tweets.texts), axis=1, kind="stable")[:, :k]
    return float(np.mean(classes[top] == tweets.labels[:, None]))


def evaluate_sqam(model: EmojiSQAM, test: Tweets, *, k: int = 5) -> dict:
    report = classification_report(test.labels, model.predict(test.texts))
    report[f"sentiment_agreement_at_{k}"] = sentiment_agreement(model, test, k=k)
    return report


def train_and_evaluate(tweets: Tweets, *, codes: np.ndarray, names: list[str], model_config=None, config=None,
                       glove_path=None, test_fraction: float = 0.2, val_fraction: float = 0.08,
                       progress: bool = False) -> tuple[EmojiSQAM, dict]:
    """Split the tweets (stratified: test, validation, train), train, and report on the test part
    beside the baselines. The report is also kept in ``model.info``."""
    from .sqam_training import SQAMTrainConfig, train_sqam

    config = config or SQAMTrainConfig()
    test, val, train = split_tweets(tweets, [test_fraction, val_fraction], seed=config.seed)
    model = train_sqam(train, val, codes=codes, names=names, model_config=model_config, config=config,
                       glove_path=glove_path, progress=progress)
    model.info["test"] = evaluate_sqam(model, test)
    model.info["baselines"] = {"majority": majority_baseline(train, test),
                               "tfidf_logreg": tfidf_baseline(train, test, seed=config.seed)}
    info = model.info["training"]
    report = {"train_tweets": info["train_tweets"], "val_tweets": info["val_tweets"], "test": model.info["test"],
              "baselines": model.info["baselines"], "best_epoch": info["best_epoch"],
              "averaged_epochs": info.get("averaged_epochs"), "val_accuracy": info["val_accuracy"], "history": info["history"],
              "seconds": info["seconds"], "glove": info["glove"]}
    return model, report
