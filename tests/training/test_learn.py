"""Learning from labels starting from a pretrained encoder (``siamese train --from``): the labels
checked in one line, the splits grouped by connected texts, the choice never worse than as-is, and
a real run from MiniLM to a model folder that loads and predicts."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from siamese.data.groups import grouped_folds, grouped_split, pair_groups
from siamese.data.pairs import Pairs, read_pairs
from siamese.decision.calibration import fit_calibrator
from siamese.decision.threshold import choose_threshold, fit_threshold
from siamese.errors import DataError
from siamese.training.learn import (
    AUC_MARGIN,
    MIN_EACH,
    MIN_LABELS,
    _decide,
    _hedge_threshold,
    _in_batch,
    _online_contrastive,
    check_labels,
    learned_line,
    threshold_accuracy,
    threshold_note,
)
from tests.conftest import assert_user_error, run, run_json


def _pairs(rows, source="labels.csv") -> Pairs:
    return Pairs([r[0] for r in rows], [r[1] for r in rows], np.array([r[2] for r in rows], np.int8), source=source)


def test_too_few_labels_say_how_many_more_of_each_kind():
    rows = [(f"q{i}", f"p{i}", int(i < 3)) for i in range(10)]  # 3 duplicates, 7 not
    with pytest.raises(DataError) as e:
        check_labels(_pairs(rows))
    message = str(e.value)
    assert "labels.csv: 10 labelled pairs (3 duplicates, 7 not)" in message
    assert f"label {MIN_EACH - 3} more duplicate(s)" in message
    assert f"{MIN_LABELS - 10 - (MIN_EACH - 3)} more pair(s) of either kind" in message


def test_one_class_only_asks_for_the_other_kind():
    rows = [(f"q{i}", f"p{i}", 1) for i in range(30)]
    with pytest.raises(DataError, match=f"label {MIN_EACH} more non-duplicate"):
        check_labels(_pairs(rows))


def test_a_pair_answered_both_ways_is_refused_whatever_its_order():
    rows = [(f"q{i}", f"p{i}", i % 2) for i in range(30)] + [("p3", "q3", 0)]  # q3/p3 was labelled 1
    with pytest.raises(
        DataError, match="1 pair\\(s\\) are labelled both duplicate and not duplicate, e.g. 'p3' / 'q3'"
    ):
        check_labels(_pairs(rows))
    check_labels(_pairs(rows[:-1] + [("p3", "q3", 1)]))  # the same answer twice is fine


@pytest.mark.parametrize("kinds", ["mixed", "duplicates only", "non-duplicates only"])
def test_the_recipe_s_online_contrastive_term_is_sentence_transformers_loss(kinds):
    """LearnOptions(contrastive=...) adds sentence-transformers' OnlineContrastiveLoss: the same value
    and gradient as its own implementation on the same vectors."""
    import torch
    from sentence_transformers.sentence_transformer.losses import OnlineContrastiveLoss

    class Given(torch.nn.Module):  # hands the loss the vectors it is given, as a model would
        def forward(self, features):
            return {"sentence_embedding": features["v"]}

    gen = torch.Generator().manual_seed(3)
    a = torch.randn(24, 8, generator=gen)
    b = a + 0.6 * torch.randn(24, 8, generator=gen)  # cosine distances on both sides of the margin
    y = torch.randint(0, 2, (24,), generator=gen).float()
    y = {"mixed": y, "duplicates only": torch.ones(24), "non-duplicates only": torch.zeros(24)}[kinds]
    theirs_a = a.clone().requires_grad_()
    theirs = OnlineContrastiveLoss(Given())([{"v": theirs_a}, {"v": b}], y)
    theirs.backward()
    ours_a = a.clone().requires_grad_()
    ours = _online_contrastive(torch.nn.functional.cosine_similarity(ours_a, b), y)
    ours.backward()
    assert float(theirs) > 0
    assert float(ours) == pytest.approx(float(theirs), rel=1e-5)
    assert torch.allclose(ours_a.grad, theirs_a.grad, atol=1e-6)


def test_the_in_batch_term_is_sentence_transformers_ranking_loss_both_ways():
    """LearnOptions(in_batch=...) adds sentence-transformers' MultipleNegativesRankingLoss with every text of the
    batch a candidate (its query_to_doc and query_to_query directions), from either side of each duplicate: on a
    batch of duplicates, the mean of its loss on (a, b) and on (b, a), value and gradient. Non-duplicate pairs
    only lend their texts as negatives, and a text twice in the batch is never its own negative."""
    import torch
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    class Given(torch.nn.Module):
        def forward(self, features):
            return {"sentence_embedding": features["v"]}

    gen = torch.Generator().manual_seed(5)
    a = torch.randn(12, 8, generator=gen)
    b = a + 0.8 * torch.randn(12, 8, generator=gen)
    theirs_a = a.clone().requires_grad_()
    loss = MultipleNegativesRankingLoss(Given(), directions=("query_to_doc", "query_to_query"))
    theirs = (loss([{"v": theirs_a}, {"v": b}], None) + loss([{"v": b}, {"v": theirs_a}], None)) / 2
    theirs.backward()
    ours_a = a.clone().requires_grad_()
    v = torch.nn.functional.normalize(torch.cat([ours_a, b]), dim=-1)
    ours = _in_batch(v, np.arange(24), torch.ones(12), 20.0)
    ours.backward()
    assert float(ours) == pytest.approx(float(theirs), rel=1e-5)
    assert torch.allclose(ours_a.grad, theirs_a.grad, atol=1e-6)

    # mixed labels, one text in two pairs: a loop over the duplicates' anchors
    ids = np.array([0, 1, 2, 3, 4, 5, 6, 0])  # the last pair is (3, 0)
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    v = torch.nn.functional.normalize(torch.randn(8, 5, generator=gen), dim=-1)
    terms = []
    for anchor, answer in [(0, 4), (4, 0), (2, 6), (6, 2)]:
        candidates = [j for j in range(8) if j == answer or ids[j] not in (ids[anchor], ids[answer])]
        logits = torch.stack([20.0 * (v[anchor] @ v[j]) for j in candidates])
        terms.append(-torch.log_softmax(logits, 0)[candidates.index(answer)])
    assert float(_in_batch(v, ids, y, 20.0)) == pytest.approx(float(torch.stack(terms).mean()), rel=1e-6)
    assert float(_in_batch(v, ids, torch.zeros(4), 20.0)) == 0.0  # no duplicate in the batch: no term


def test_groups_folds_and_split_keep_every_text_on_one_side():
    # a chain q0-q1-q2 (one group), a star around h, and singletons
    rows = [("q0", "q1", 1), ("q1", "q2", 0), ("h", "a", 1), ("h", "b", 0), ("h", "c", 0)]
    rows += [(f"s{i}", f"t{i}", i % 2) for i in range(20)]
    pairs = _pairs(rows)
    groups = pair_groups(pairs.text1, pairs.text2)
    assert groups[0] == groups[1] and groups[2] == groups[3] == groups[4] and groups[0] != groups[2]
    assert len(set(groups.tolist())) == 22
    folds = grouped_folds(groups, 3, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(rows)))
    for f in folds:
        inside = {t for i in f for t in (rows[i][0], rows[i][1])}
        outside = {t for i in set(range(len(rows))) - set(f.tolist()) for t in (rows[i][0], rows[i][1])}
        assert not inside & outside
    test, rest = grouped_split(pairs, 0.3, seed=0)
    assert len(test) + len(rest) == len(rows) and 5 <= len(test) <= 12
    assert not (set(test.text1) | set(test.text2)) & (set(rest.text1) | set(rest.text2))


def test_the_fine_tune_is_kept_only_when_cross_validation_says_it_beats_as_is():
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 50)
    pretrained = y * 0.3 + rng.normal(0, 0.2, len(y))  # separates the labels fairly well
    noise = rng.normal(0, 1, len(y))  # a fine-tune that learned nothing
    folds = np.array_split(rng.permutation(len(y)), 4)
    cv = {"rows": np.arange(len(y)), "held": {1: noise, 2: noise + 0.01}, "folds": folds}
    kept = _decide(cv, pretrained, y, _options())
    assert kept["chosen"] == "as-is"
    assert kept["cross_validation"]["as_is"]["accuracy"] == threshold_accuracy(pretrained, y, folds, "accuracy")
    assert kept["cross_validation"]["as_is"]["accuracy"] > kept["cross_validation"]["fine_tuned"]["accuracy"]
    assert kept["threshold_choice"]["chosen_on"] == ["the labels"]
    # as it is: the threshold to decide new pairs by, where a Platt fit of the labels crosses 1/2
    assert (kept["threshold"], kept["threshold_choice"]["rule"]) == (fit_threshold(pretrained, y)[0], "platt")
    good = y * 1.0 + rng.normal(0, 0.05, len(y))  # a fine-tune that separates them better
    cv["held"] = {1: noise, 2: good}
    tuned = _decide(cv, pretrained, y, _options())
    assert tuned["chosen"] == "fine-tuned" and tuned["epoch"] == 2
    assert 0.0 < tuned["threshold"] < 1.0  # between the two labels' held-out cosines


def test_a_fine_tune_that_ranks_better_is_kept_though_its_fitted_threshold_is_no_more_accurate():
    from sklearn.metrics import roc_auc_score

    y = np.array([0, 1] * 20)
    folds = [np.arange(0, 20), np.arange(20, 40)]
    pretrained = np.where(y == 1, 0.8, 0.4 + 0.001 * np.cumsum(y == 0))  # non-duplicates 0.401, 0.402, ...
    pretrained[[0, 20]] = 0.6  # per fold a non-duplicate above the others
    pretrained[[1, 21]] = 0.3  # and a duplicate under every non-duplicate
    tuned = pretrained.copy()
    tuned[[1, 21]] = 0.5  # that duplicate now above all non-duplicates but one: one mistake per fold still
    cv = {"rows": np.arange(len(y)), "held": {1: tuned}, "folds": folds}
    decision = _decide(cv, pretrained, y, _options())
    measured = decision["cross_validation"]
    assert measured["fine_tuned"]["accuracy"] == measured["as_is"]["accuracy"]
    mean_auc = np.mean([roc_auc_score(y[f], pretrained[f]) for f in folds])
    assert measured["as_is"]["roc_auc"] == pytest.approx(mean_auc)  # over the folds, like the fine-tune's
    assert measured["fine_tuned"]["roc_auc"] > measured["as_is"]["roc_auc"] + AUC_MARGIN
    assert decision["chosen"] == "fine-tuned"
    cv["held"] = {1: pretrained.copy()}  # level on both: as-is
    assert _decide(cv, pretrained, y, _options())["chosen"] == "as-is"
    nearly = pretrained.copy()
    nearly[1] = 0.4025  # above one non-duplicate of its fold: that fold's ROC-AUC up by 0.01, the mean by 0.005
    cv["held"] = {1: nearly}
    close = _decide(cv, pretrained, y, _options())
    auc = {k: v["roc_auc"] for k, v in close["cross_validation"].items()}
    assert 0 < auc["fine_tuned"] - auc["as_is"] < AUC_MARGIN and close["chosen"] == "as-is"


def test_batches_of_long_texts_are_cut_to_a_token_budget():
    from siamese.training.learn import _capped_batches

    lengths = [5] * 40 + [100] * 10 + [300]
    batches = list(_capped_batches(np.arange(len(lengths)), lengths, 16, 1000))
    assert np.concatenate(batches).tolist() == list(range(len(lengths)))  # every text once, in order
    assert [len(b) for b in batches] == [16, 16, 8 + 2, 8, 1]  # then only 10 of 100 tokens fit, then 300 alone
    for b in batches:
        assert len(b) <= 16 and (len(b) == 1 or len(b) * lengths[b[-1]] <= 1000)


def test_long_batches_recompute_their_activations_with_the_same_gradients(monkeypatch):
    import torch

    import siamese.training.learn as learn_module
    from siamese.models.sentence_encoder import load_bi_encoder

    model = load_bi_encoder("minilm", device="cpu")
    tower = learn_module._Tower(model, None, torch.device("cpu"), "fp32")
    texts = ["How do I cancel my car insurance policy? " * 12, "What can I do if my car insurance is cancelled?"]
    states, _ = tower.states(model.vectorizer.encode(texts))
    assert max(len(s) for s in states) > 64

    def gradients(recompute_above: int) -> list:
        monkeypatch.setattr(learn_module, "RECOMPUTE_ABOVE", recompute_above)
        torch.manual_seed(0)
        top = tower.top().train()
        v = top(states)
        (v[0] @ v[1]).backward()
        return [p.grad.clone() for p in top.parameters()]

    kept, recomputed = gradients(10_000), gradients(64)
    assert len(kept) == len(recomputed) > 0
    for a, b in zip(kept, recomputed):
        torch.testing.assert_close(a, b)  # dropout replays the same mask


def test_the_pull_keeps_the_trained_top_nearer_the_pretrained_weights(data_dir):
    """LearnOptions(pull=...): L2-SP, the squared distance from the pretrained weights added to the loss."""
    import torch

    from siamese.models.sentence_encoder import load_bi_encoder
    from siamese.training.learn import LearnOptions, _Tower, fine_tune

    model = load_bi_encoder("minilm", device="cpu")
    tower = _Tower(model, 4, torch.device("cpu"), "fp32")
    pairs = read_pairs(data_dir / "mqp" / "mqp.csv")
    texts = list(dict.fromkeys(pairs.text1[:48] + pairs.text2[:48]))
    where = {t: i for i, t in enumerate(texts)}
    states, _ = tower.states(model.vectorizer.encode(texts))
    a = np.array([where[t] for t in pairs.text1[:48]])
    b = np.array([where[t] for t in pairs.text2[:48]])
    start = [p.detach().clone() for p in tower.top().parameters()]

    def moved(pull: float) -> float:
        options = LearnOptions(epochs=2, lr=5e-4, weight_decay=0.0, pull=pull, device="cpu")
        top = fine_tune(tower, states, a, b, pairs.labels[:48], options, 2)
        return float(sum(((p.detach() - p0) ** 2).sum() for p, p0 in zip(top.parameters(), start)))

    free, pulled = moved(0.0), moved(10.0)
    assert free > 0 and pulled < 0.5 * free


def _options():
    from siamese.training.learn import LearnOptions

    return LearnOptions()


# -- a real run from MiniLM ------------------------------------------------------------------------------------


def test_the_final_threshold_is_the_midpoint_of_the_held_out_and_the_own_choice():
    # the final model's own cosines of the labels: duplicates from 0.8 up, the rest under 0.6
    own = np.array([0.9, 0.85, 0.8, 0.55, 0.5, 0.3])
    y = np.array([1, 1, 1, 0, 0, 0])
    decision = {"threshold": 0.5, "threshold_choice": {"metric": "accuracy", "value": 0.9}}
    _hedge_threshold(decision, own, y, "accuracy")
    assert decision["threshold"] == pytest.approx((0.5 + 0.675) / 2)  # 0.675: between 0.55 and 0.8
    choice = decision["threshold_choice"]
    assert choice["held_out_threshold"] == 0.5 and choice["own_threshold"] == pytest.approx(0.675)


def test_a_fine_tune_kept_from_one_held_out_quarter_takes_the_platt_cut_of_its_cosines():
    rng = np.random.default_rng(8)  # a draw where the quarter's best cut sits 0.025 under its Platt cut
    y = (rng.random(1000) < 0.4).astype(int)
    pretrained = 0.6 + 0.05 * y + rng.normal(0, 0.1, len(y))
    tuned = 0.5 + 0.2 * y + rng.normal(0, 0.1, len(y))  # ranks far better
    rows = np.arange(250)  # the held-out quarter; its model is the one kept
    cv = {"rows": rows, "groups": rows, "held": {1: tuned[rows]}}
    decision = _decide(cv, pretrained, y, _options())
    platt_cut, found = fit_threshold(tuned[rows], y[rows])
    best_cut = choose_threshold(tuned[rows], y[rows])[0]
    assert decision["chosen"] == "fine-tuned" and found["rule"] == "platt" and abs(platt_cut - best_cut) > 0.02
    assert decision["threshold"] == platt_cut and decision["threshold_choice"]["rule"] == "platt"
    # K folds: the best cut of the held-out cosines (hedged after the final fit, above)
    cv = {"rows": np.arange(len(y)), "held": {1: tuned}, "folds": np.array_split(np.arange(len(y)), 3)}
    assert _decide(cv, pretrained, y, _options())["threshold"] == choose_threshold(tuned, y)[0]


@pytest.fixture(scope="module")
def labels_file(data_dir, tmp_path_factory):
    """64 medical question pairs (MQP), both labels."""
    pairs = read_pairs(data_dir / "mqp" / "mqp.csv")
    path = tmp_path_factory.mktemp("learn") / "labels.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["text1", "text2", "label"])
        out.writerows(zip(pairs.text1[:64], pairs.text2[:64], pairs.labels[:64].tolist()))
    return path


@pytest.fixture(scope="module")
def learned(labels_file, tmp_path_factory):
    """``siamese train --from minilm`` on the 64 pairs, a grouped quarter held out: (folder, result)."""
    out = tmp_path_factory.mktemp("learned") / "model"
    result = run_json("train", "--data", labels_file, "--from", "minilm", "--out", out, "--epochs", 1,
                      "--test-fraction", 0.25, "--quiet")  # fmt: skip
    return out, result


def test_train_from_minilm_writes_a_model_folder_with_its_test_split(labels_file, learned):
    from siamese import SiameseModel

    out, result = learned
    assert result["chosen"] in ("fine-tuned", "as-is") and result["labels"] + result["test"]["learned"]["n"] == 64
    cv = result["cross_validation"]
    assert set(cv) == {"as_is", "fine_tuned"} and all(0.0 <= v["accuracy"] <= 1.0 for v in cv.values())
    ahead = cv["fine_tuned"]["accuracy"] > cv["as_is"]["accuracy"] or (
        cv["fine_tuned"]["roc_auc"] > cv["as_is"]["roc_auc"] + AUC_MARGIN
    )
    assert ahead == (result["chosen"] == "fine-tuned")  # never behind as-is by cross-validation
    test = read_pairs(out / "test.csv")
    train = read_pairs(labels_file)
    held = set(test.text1) | set(test.text2)
    rest = [(a, b) for a, b in zip(train.text1, train.text2) if a not in held and b not in held]
    assert len(rest) == result["labels"]  # every question's pairs on one side
    model = SiameseModel.load(out)
    assert model.threshold == pytest.approx(result["threshold"])
    # 48 labels, three folds: a fine-tune is trained on every label and left uncalibrated; MiniLM kept as it is
    # is calibrated on all of them
    if result["chosen"] == "fine-tuned":
        assert model.calibrator is None and "trained on every label" in result["calibration"]["note"]
    else:
        assert model.calibrator.fitted_on["pairs"] == result["labels"] and result["calibration"]["fitted"]
    assert json.loads((out / "config.json").read_text())["info"]["learned"]["chosen"] == result["chosen"]
    card = (out / "README.md").read_text()
    assert "cross-validated on the labels" in card
    assert ("| loss | cosent |" if result["chosen"] == "fine-tuned" else "| loss | none (kept as it is) |") in card
    assert "| tokenizer | the pretrained model's WordPiece (tokenizer.json) |" in card
    assert set(result["test"]) == {"as_is", "learned"}
    proc = run("predict", out, test.text1[0], test.text2[0], "--json")
    assert "similarity" in json.loads(proc.stdout)


def test_above_the_fold_limit_a_held_out_quarter_chooses_the_epoch_and_refit_trains_on_every_label(
    labels_file, monkeypatch
):
    import siamese.training.learn as learn_module
    from siamese.training.learn import LearnOptions, learn

    monkeypatch.setattr(learn_module, "HOLDOUT_ABOVE", 40)  # 64 labels: the held-out quarter plan
    monkeypatch.setattr(learn_module, "AUC_MARGIN", -1.0)  # keep the fine-tune whatever it measured
    labels = read_pairs(labels_file)
    quarter = learn(labels, "minilm", options=LearnOptions(epochs=1))
    refit = learn(labels, "minilm", options=LearnOptions(epochs=1, refit=True))
    kept, again = quarter.info["learned"], refit.info["learned"]
    assert kept["plan"].startswith("one grouped quarter held out") and kept["plan"] == again["plan"]
    held = kept["held_out_pairs"]
    assert 0 < held < 64 and kept["final_fit_labels"] == 64 - held and again["final_fit_labels"] == 64
    # the quarter's model keeps fit_threshold's cut of its held-out cosines (worked out again here); the refit hedges it
    assert "own_threshold" not in kept["threshold_choice"]
    rows = learn_module._folds(pair_groups(labels.text1, labels.text2), labels.labels, 4, 0)[0][0]
    assert len(rows) == held
    held_cosines = quarter.similarity_pairwise([labels.text1[i] for i in rows], [labels.text2[i] for i in rows])
    assert quarter.threshold == pytest.approx(fit_threshold(held_cosines, labels.labels[rows])[0], abs=2e-3)
    assert kept["threshold_choice"]["rule"] == fit_threshold(held_cosines, labels.labels[rows])[1]["rule"]
    choice = again["threshold_choice"]
    assert refit.threshold == pytest.approx((choice["held_out_threshold"] + choice["own_threshold"]) / 2)
    assert choice["held_out_threshold"] == pytest.approx(quarter.threshold)  # the same quarter, the same cut
    a, b = labels.text1[:8], labels.text2[:8]
    assert not np.allclose(quarter.similarity_pairwise(a, b), refit.similarity_pairwise(a, b), atol=1e-4)
    # probability: the quarter's model is calibrated on its held-out cosines (fitted again here, the same numbers);
    # the refit was trained on every label and is not calibrated
    assert kept["calibration"]["fitted"] and kept["calibration"]["pairs"] == held
    again_fit = fit_calibrator(held_cosines, labels.labels[rows], seed=0)
    assert quarter.calibrator.method == again_fit.method and quarter.calibrator.fitted_on["pairs"] == held
    assert np.allclose(quarter.probability(a, b), again_fit(quarter.similarity_pairwise(a, b)), atol=2e-3)
    assert refit.calibrator is None and refit.probability(a, b) is None
    assert again["calibration"] == {"fitted": False, "note": again["calibration"]["note"]}


def test_train_from_a_saved_model_folder_goes_on_from_it(labels_file, learned, tmp_path):
    from siamese import SiameseModel

    out = tmp_path / "again"
    result = run_json("train", "--data", labels_file, "--from", learned[0], "--out", out, "--epochs", 1, "--quiet")
    assert result["from"] == str(learned[0]) and result["labels"] == 64
    assert SiameseModel.load(out).info["learned"]["source"] == str(learned[0])


def test_train_from_takes_no_cross_encoder_options(labels_file, tmp_path):
    proc = run("train", "--data", labels_file, "--from", "minilm", "--cross", "--out", tmp_path / "x", check_ok=False)
    assert_user_error(proc, "--from", "--cross")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "given,named",
    [
        (["--encoder", "bow"], "--encoder"),
        (["--loss", "mnr", "--head", "manhattan", "--pooling", "cls"], "--head, --loss, --pooling"),
        (["--precision", "fp32", "--no-calibrate", "-o", "hidden=8"], "--precision, --calibrate, -o hidden"),
    ],
)
def test_train_from_refuses_the_options_its_recipe_would_not_use(labels_file, tmp_path, given, named):
    """They were ignored: `--from minilm --encoder bow` saved MiniLM fine-tuned, saying nothing."""
    proc = run("train", "--data", labels_file, "--from", "minilm", *given, "--out", tmp_path / "x", check_ok=False)
    assert_user_error(proc, f"--from fine-tunes the source's own transformer, head and loss by its own recipe: "
                            f"leave out {named} (it takes --epochs")  # fmt: skip
    assert not (tmp_path / "x").exists()


def test_the_same_command_runs_again_into_its_own_folder_and_names_what_the_split_left(learned, labels_file):
    """A second run of a --test-fraction command into the same folder was refused for the test.csv the first
    one wrote ("files siamese did not write"). A split that leaves too few labels says so."""
    out, first = learned
    again = run_json("train", "--data", labels_file, "--from", "minilm", "--out", out, "--epochs", 1,
                     "--test-fraction", 0.25, "--quiet")  # fmt: skip
    assert again["labels"] == first["labels"] and (out / "test.csv").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["loss"] == ("cosent" if again["chosen"] == "fine-tuned" else "triplet")  # the loss it learned by
    proc = run("train", "--data", labels_file, "--from", "minilm", "--out", out, "--test-fraction", 0.8,
               check_ok=False)  # fmt: skip
    assert_user_error(proc, "labels.csv less the --test-fraction 0.8 split (", "labelled pairs")


def test_train_from_refuses_bad_labels_before_writing(tmp_path):
    path = tmp_path / "few.csv"
    path.write_text("text1,text2,label\n" + "".join(f"q{i},p{i},{i % 2}\n" for i in range(8)))
    out = tmp_path / "out"
    proc = run("train", "--data", path, "--from", "minilm", "--out", out, check_ok=False)
    assert_user_error(proc, str(path), "8 labelled pairs (4 duplicates, 4 not)", "more duplicate(s)")
    assert not out.exists()


def test_a_test_split_that_cannot_be_grouped_is_refused_in_one_line():
    from siamese.training.run import held_out_split

    star = _pairs([("hub", f"q{i}", i % 2) for i in range(40)])  # every pair shares "hub": one group
    with pytest.raises(DataError, match="labels.csv: --test-fraction 0.2: the pairs form too few separate groups"):
        held_out_split(star, 0.2)
    test, rest = held_out_split(_pairs([(f"a{i}", f"b{i}", i % 2) for i in range(40)]), 0.2)
    assert len(test) == 8 and len(rest) == 32


def test_the_one_line_says_what_was_kept_and_for_how_many_epochs():
    measured = {"as_is": {"accuracy": 0.8, "roc_auc": 0.88}, "fine_tuned": {"accuracy": 0.87, "roc_auc": 0.93}}
    info = {"source": "minilm", "labels": 2132, "plan": "3 grouped folds", "cross_validation": measured}
    one = learned_line({**info, "chosen": "fine-tuned", "epoch": 1})
    assert one.startswith("fine-tuned minilm on 2,132 labels for 1 epoch: cross-validated accuracy as-is 0.800")
    assert "ROC-AUC 0.880, 0.930 (3 grouped folds)" in one
    assert "for 3 epochs:" in learned_line({**info, "chosen": "fine-tuned", "epoch": 3})
    kept = learned_line({**info, "chosen": "as-is", "epoch": 2})
    assert kept.startswith("kept minilm as it is, with its threshold set on the 2,132 labels")
    assert f"nor in ranking by {AUC_MARGIN}" in kept


def test_the_threshold_line_says_how_the_threshold_was_chosen():
    base = {"labels": 1000, "chosen": "fine-tuned"}
    quarter = {**base, "threshold_choice": {"rule": "platt", "val_pairs": 250}}
    assert threshold_note(quarter) == "where a logistic fit crosses 1/2, on the cosines of 250 held-out labels"
    folds = {**base, "threshold_choice": {"rule": "best cut", "val_pairs": 200, "own_threshold": 0.7}}
    assert threshold_note(folds).startswith("midway between the best cuts of the held-out and the final model's")
    kept = {**base, "chosen": "as-is", "threshold_choice": {"rule": "best cut", "val_pairs": 1000}}
    assert threshold_note(kept) == "the most accurate cut, on the cosines of 1000 labels"
