"""fit_threshold: the threshold from a few labels is where a Platt fit crosses 1/2 (checked against
scikit-learn's logistic regression), and the best cut where that fit does not describe the labels."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from siamese.decision.threshold import PLATT_C, choose_threshold, fit_threshold, platt


def _sigmoid_labels(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosines with P(duplicate | s) a rising sigmoid crossing 1/2 at 0.8 (most pairs below it)."""
    rng = np.random.default_rng(seed)
    s = rng.beta(6, 3, n)
    y = rng.random(n) < 1 / (1 + np.exp(-25 * (s - 0.8)))
    return s, y.astype(int)


def test_it_is_where_a_logistic_fit_of_the_labels_crosses_one_half():
    s, y = _sigmoid_labels(200, 0)
    reference = LogisticRegression(C=PLATT_C, max_iter=1000).fit(s.reshape(-1, 1), y)
    expected = -reference.intercept_[0] / reference.coef_[0, 0]
    t, choice = fit_threshold(s, y)
    assert choice["rule"] == "platt" and t == pytest.approx(expected, abs=1e-4)
    assert choice["value"] == pytest.approx(np.mean((s > t) == y))


def test_on_new_pairs_it_is_closer_to_the_best_cut_of_all_pairs_than_the_best_cut_of_the_labels():
    # 100 labels drawn 40 times from one population; the threshold scored on 20,000 other pairs of it
    s_all, y_all = _sigmoid_labels(20_000, 1)
    fitted, best = [], []
    for seed in range(40):
        s, y = _sigmoid_labels(100, 100 + seed)
        fitted.append(np.mean((s_all > fit_threshold(s, y)[0]) == y_all))
        best.append(np.mean((s_all > choose_threshold(s, y)[0]) == y_all))
    assert np.mean(fitted) > np.mean(best)


def test_where_the_odds_do_not_rise_as_a_sigmoid_it_is_the_best_cut():
    # PAWS-like: the duplicates between 0.96 and 0.99, but the word swaps that are not duplicates
    # score highest; one sigmoid cannot rise and fall, and its cut lands among the word swaps
    rng = np.random.default_rng(2)
    s = np.concatenate([rng.uniform(0.80, 0.96, 100), rng.uniform(0.96, 0.99, 60), rng.uniform(0.99, 1.0, 40)])
    y = np.r_[np.zeros(100), np.ones(60), np.zeros(40)].astype(int)
    a, b = platt(s, y)
    assert np.mean((s > -b / a) == y) < 0.8 - 0.05  # the Platt cut, against the best cut's 80 %
    t, choice = fit_threshold(s, y)
    assert choice["rule"] == "best cut" and t == choose_threshold(s, y)[0] and choice["value"] == 0.8


def test_falling_odds_and_f1_take_the_best_cut():
    s, y = _sigmoid_labels(200, 3)
    t, choice = fit_threshold(-s, y)  # duplicates likelier at a lower score: no rising fit
    assert choice["rule"] == "best cut" and t == choose_threshold(-s, y)[0]
    t, choice = fit_threshold(s, y, "f1")
    assert choice["rule"] == "best cut" and (t, choice["value"]) == (
        choose_threshold(s, y, "f1")[0],
        choose_threshold(s, y, "f1")[1]["value"],
    )


def test_sigmoid_is_the_logistic_function_without_overflow_warnings():
    """The cross-encoder's scores, Platt's chances and the calibrator all go through it: logits of +-1000 (an
    over-confident cross-encoder) give 0 and 1 and no RuntimeWarning (1 / (1 + exp(-z)) overflowed)."""
    import warnings

    from siamese.decision.threshold import sigmoid

    z = np.linspace(-30, 30, 61)
    assert np.allclose(sigmoid(z), 1.0 / (1.0 + np.exp(-z)), rtol=1e-12, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extreme = sigmoid(np.array([-1000.0, -800.0, 800.0, 1000.0]))
    assert extreme.tolist() == [0.0, 0.0, 1.0, 1.0]
