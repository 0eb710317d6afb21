"""Training: it learns something that generalises, reports honestly, is reproducible; its parts
(batches, threshold choice, lazy Adam) checked against simple re-implementations."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sklearn import metrics

import siamese.training.bi_encoder
from siamese import (
    ConfigError,
    DataError,
    ModelConfig,
    ModelError,
    SiameseModel,
    TrainConfig,
    choose_threshold,
    datasets,
    train,
    triplet_loss,
)
from siamese.data.pairs import Pairs
from siamese.evaluation.metrics import classification_report, evaluate
from siamese.models.siamese import DEFAULT_THRESHOLD
from siamese.runtime import kernels
from siamese.training.batches import batches
from siamese.training.loop import Checkpoint
from siamese.training.optim import LazyAdam


def held_out_triplet_loss(model: SiameseModel, pairs: Pairs, batch: int = 64) -> float:
    """Mean per-pair triplet loss on the duplicates of ``pairs`` (fixed random batches)."""
    pos = pairs.positives()
    a, b = model.encode(pos.text1), model.encode(pos.text2)
    order = np.random.default_rng(0).permutation(len(pos))
    chunks = np.array_split(order, len(order) // batch)
    return float(np.mean([triplet_loss(a[c], b[c]).item() for c in chunks]))


@pytest.fixture(scope="module")
def untrained(trained) -> SiameseModel:
    """The model training starts from: same vocabulary texts, same seed, no updates."""
    pairs = trained.train_pairs  # the vocabulary comes from every training text, both labels
    return SiameseModel.build(pairs.text1 + pairs.text2, ModelConfig(seed=0))


def test_trained_model_separates_held_out_duplicates(trained, untrained, data_dir):
    msrp = datasets.load("msrp-test", data_dir)
    report = evaluate(trained.model, msrp)
    assert report["roc_auc"] > 0.6  # chance is 0.5
    assert report["average_precision"] > msrp.labels.mean()  # chance is the positive rate
    # Training lowered the objective on duplicates it never saw ...
    assert held_out_triplet_loss(trained.model, msrp) < 0.8 * held_out_triplet_loss(untrained, msrp)
    # ... and ranks graded similarity of an unseen corpus (STS-B test) better than the untrained encoder.
    sts = datasets.load("sts-test", data_dir)
    assert evaluate(trained.model, sts)["spearman"] > evaluate(untrained, sts)["spearman"] + 3


def test_training_summary(trained):
    info = trained.model.info["training"]
    history = info["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    for h in history:
        assert math.isfinite(h["loss"]) and h["loss"] > 0
        assert math.isfinite(h["val_loss"]) and h["val_loss"] > 0
        assert h["pairs_per_second"] > 0 and h["seconds"] > 0
    assert history[1]["loss"] < history[0]["loss"]
    assert info["best_epoch"] == 1 + int(np.argmin([h["val_loss"] for h in history]))
    assert info["pairs_per_second"] > 0
    assert info["seconds"] >= info["train_seconds"] > 0
    assert info["train_pairs"] == int(trained.train_pairs.labels.sum())
    assert info["val_pairs"] == len(trained.val_pairs)
    assert info["sources"] == ["paws-qqp-train+msrp-train", "msrp-val"]
    assert info["config"]["epochs"] == 2


def test_threshold_is_chosen_on_validation_pairs(trained):
    val = trained.val_pairs
    sims = trained.model.similarity_pairwise(val.text1, val.text2)
    expected, choice = choose_threshold(sims, val.labels, metric="accuracy")
    assert trained.model.threshold == expected
    assert trained.model.info["training"]["threshold"] == expected
    assert choice.items() <= trained.model.info["training"]["threshold_choice"].items()
    assert trained.model.info["training"]["threshold_choice"]["split"] == "validation"
    assert classification_report(sims, val.labels, expected)["accuracy"] == pytest.approx(choice["value"])
    assert expected != DEFAULT_THRESHOLD


@pytest.fixture(scope="module")
def small_pairs(data_dir):
    return datasets.load("msrp-train", data_dir).positives().subset(np.arange(600))


@pytest.fixture(scope="module")
def small_val(data_dir):
    return datasets.load("msrp-val", data_dir).subset(np.arange(200))


def quick(pairs, val=None, checkpoint=None, resume=False, **kw):
    config = TrainConfig(**{"epochs": 1, "batch_size": 64, **kw})
    model_config = ModelConfig(dim=32, seed=config.seed)
    return train(
        pairs, val, model_config=model_config, config=config, checkpoint=checkpoint, resume=resume, progress=False
    )


NATIVE_BF16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
needs_bf16 = pytest.mark.skipif(not NATIVE_BF16, reason="this CPU has no native bfloat16 (AVX512-BF16/AMX)")


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=needs_bf16)])
def test_same_seed_same_model(small_pairs, small_val, precision):
    a = quick(small_pairs, small_val, precision=precision, seed=5)
    b = quick(small_pairs, small_val, precision=precision, seed=5)
    sa, sb = a.encoder.state_dict(), b.encoder.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    texts = small_val.text1[:50]
    np.testing.assert_array_equal(a.encode(texts), b.encode(texts))
    assert a.threshold == b.threshold
    c = quick(small_pairs, small_val, precision=precision, seed=6)
    assert not torch.equal(sa["lstm.weight_ih_l0"], c.encoder.state_dict()["lstm.weight_ih_l0"])


def test_training_changes_the_weights(small_pairs):
    pos = small_pairs
    start = SiameseModel.build(pos.text1 + pos.text2, ModelConfig(dim=32, seed=0)).encoder.state_dict()
    end = quick(small_pairs, seed=0).encoder.state_dict()
    for k in start:
        assert not torch.equal(start[k], end[k]), k


def test_best_weights_are_kept_and_the_checkpoint_is_a_whole_model_folder(small_pairs, small_val, tmp_path):
    ckpt = tmp_path / "ckpt"
    model = quick(small_pairs, small_val, epochs=3, checkpoint=ckpt)
    history = model.info["training"]["history"]
    best = model.info["training"]["best_epoch"]
    assert best == 1 + int(np.argmin([h["val_loss"] for h in history]))
    # This run's validation loss rises after its best epoch, so "kept the best" differs from "kept the last".
    assert best < len(history) == 3
    # The checkpoint holds the last epoch's weights as a model folder anyone can load (was: the
    # encoder's weights only, so a classifier head was lost), plus the state a resume needs.
    last = SiameseModel.load(ckpt)
    assert last.config == model.config and last.threshold == DEFAULT_THRESHOLD  # chosen after the epochs
    assert not torch.equal(
        last.encoder.state_dict()["lstm.weight_ih_l0"], model.encoder.state_dict()["lstm.weight_ih_l0"]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temporary folders left
    assert {"trainer_state.json", "trainer_state.safetensors", "config.json"} <= {p.name for p in ckpt.iterdir()}


def test_resume_after_a_crash_gives_the_uninterrupted_model(small_pairs, small_val, tmp_path, monkeypatch):
    kw = dict(epochs=4, seed=3, precision="fp32", workers=1, warmup_steps=5)  # a scheduler's state too
    whole = quick(small_pairs, small_val, **kw)

    written = Checkpoint.__call__

    def crash_after_epoch_2(self, trainer):
        written(self, trainer)
        if trainer.epoch == 2:
            raise KeyboardInterrupt  # the process dies right after the checkpoint of epoch 2

    monkeypatch.setattr(Checkpoint, "__call__", crash_after_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        quick(small_pairs, small_val, checkpoint=tmp_path / "ck", **kw)
    monkeypatch.undo()
    assert json.loads((tmp_path / "ck" / "trainer_state.json").read_text())["trainer"]["epoch"] == 2
    resumed = quick(small_pairs, small_val, checkpoint=tmp_path / "ck", resume=True, **kw)
    assert [h["loss"] for h in resumed.info["training"]["history"]] == [
        h["loss"] for h in whole.info["training"]["history"]
    ]
    for k, v in whole.encoder.state_dict().items():
        assert torch.equal(resumed.encoder.state_dict()[k], v), k
    assert resumed.threshold == whole.threshold
    with pytest.raises(ConfigError, match="seed differ"):
        quick(small_pairs, small_val, checkpoint=tmp_path / "ck", resume=True, **{**kw, "seed": 4})
    with pytest.raises(ModelError, match="not a training checkpoint"):
        quick(small_pairs, small_val, checkpoint=tmp_path / "nothing", resume=True, **kw)


def test_without_validation_keeps_default_threshold(small_pairs):
    model = quick(small_pairs, None)
    assert model.threshold == DEFAULT_THRESHOLD
    assert "val_loss" not in model.info["training"]["history"][0]
    assert model.info["training"]["val_pairs"] == 0


def test_rejects_too_few_duplicates_and_bad_precision(small_pairs):
    one = small_pairs.subset([0])
    with pytest.raises(DataError, match="need at least 2 duplicate pairs"):
        quick(one)
    negatives = Pairs(["a", "b"], ["c", "d"], np.array([0, 0], dtype=np.int8), source="negs.csv")
    with pytest.raises(DataError, match="negs.csv"):
        quick(negatives)
    with pytest.raises(ValueError, match="precision"):
        quick(small_pairs, precision="fp16")


def test_auto_precision_follows_the_cpu(small_pairs):
    assert quick(small_pairs).info["training"]["precision"] == ("bf16" if NATIVE_BF16 else "fp32")
    if not NATIVE_BF16:  # asking for bf16 on a CPU without it is a clear error, not a oneDNN crash
        with pytest.raises(ValueError, match="native bfloat16"):
            quick(small_pairs, precision="bf16")


def test_bad_threshold_metric_is_rejected_before_training(small_pairs, small_val, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("training started with an invalid threshold_metric")

    monkeypatch.setattr(siamese.training.bi_encoder, "batches", no_training)
    with pytest.raises(ValueError, match="recall"):
        quick(small_pairs, small_val, threshold_metric="recall")


# -- batches ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, batch_size", [(1000, 64), (1024, 64), (130, 64), (10, 4), (50, 64)])
@pytest.mark.parametrize("bucket", [True, False])
def test_batches_cover_every_index_once(n, batch_size, bucket):
    lengths = np.random.default_rng(n).integers(1, 60, size=n)
    plan = batches(lengths, batch_size, np.random.default_rng(0), bucket=bucket, span=3)
    flat = np.concatenate(plan)
    assert len(flat) == len(set(flat.tolist())) == n
    assert set(flat.tolist()) == set(range(n))
    assert all(2 <= len(b) <= batch_size for b in plan)


@pytest.mark.parametrize("bucket", [True, False])
def test_batches_merge_a_trailing_singleton(bucket):
    # One pair alone has no in-batch negative: it joins the previous batch, so no pair is skipped.
    n, batch_size = 129, 64
    plan = batches(np.ones(n, dtype=int), batch_size, np.random.default_rng(0), bucket=bucket)
    flat = np.concatenate(plan)
    assert len(flat) == len(set(flat.tolist())) == n
    assert sorted(len(b) for b in plan) == [64, 65]


def padding(plan, lengths) -> int:
    return int(sum(len(b) * lengths[b].max() - lengths[b].sum() for b in plan))


def test_bucketing_reduces_padding(data_dir):
    pairs = datasets.load("msrp-train", data_dir)
    lengths = np.array([max(len(a.split()), len(b.split())) for a, b in zip(pairs.text1, pairs.text2)])
    lengths = np.concatenate([lengths, np.random.default_rng(0).integers(1, 120, size=3000)])  # wider spread
    bucketed = batches(lengths, 64, np.random.default_rng(1), bucket=True, span=20)
    shuffled = batches(lengths, 64, np.random.default_rng(1), bucket=False)
    assert padding(bucketed, lengths) < 0.5 * padding(shuffled, lengths)
    # still shuffled: batch order is not sorted by length, and different seeds give different plans
    maxima = [lengths[b].max() for b in bucketed]
    assert maxima != sorted(maxima)
    other = batches(lengths, 64, np.random.default_rng(2), bucket=True, span=20)
    assert [b.tolist() for b in other] != [b.tolist() for b in bucketed]


# -- choose_threshold ----------------------------------------------------------------------------


def brute_force(scores, labels, metric):
    """Best metric over every threshold between two consecutive distinct scores (and beyond both ends)."""
    s = np.unique(scores)
    candidates = np.concatenate([[s[0] - 1], (s[:-1] + s[1:]) / 2, [s[-1] + 1]])
    score = metrics.accuracy_score if metric == "accuracy" else metrics.f1_score
    kw = {} if metric == "accuracy" else {"zero_division": 0}
    return max(score(labels, (scores > t).astype(int), **kw) for t in candidates)


@pytest.mark.parametrize("metric", ["accuracy", "f1"])
@pytest.mark.parametrize("case", range(8))
def test_choose_threshold_matches_brute_force(metric, case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(5, 120))
    labels = rng.integers(0, 2, size=n)
    scores = np.clip(rng.normal(0.3 * labels, 0.4), -1, 1)
    if case % 2:
        scores = np.round(scores, 1)  # many ties
    t, choice = choose_threshold(scores, labels, metric=metric)
    best = brute_force(scores, labels, metric)
    assert choice == {"metric": metric, "value": pytest.approx(best)}
    predicted = (scores > t).astype(int)
    achieved = (
        metrics.accuracy_score(labels, predicted)
        if metric == "accuracy"
        else metrics.f1_score(labels, predicted, zero_division=0)
    )
    assert achieved == pytest.approx(best)
    assert not np.any(np.isclose(scores, t, atol=1e-9))  # never sits on a score


def test_choose_threshold_extremes():
    scores = np.array([0.9, 0.5, 0.1])
    t, choice = choose_threshold(scores, np.array([0, 0, 0]))
    assert t > 0.9 and choice["value"] == 1.0  # predict nothing
    t, choice = choose_threshold(scores, np.array([1, 1, 1]))
    assert t < 0.1 and choice["value"] == 1.0  # predict everything
    t, _ = choose_threshold(scores, np.array([1, 0, 0]))
    assert 0.5 < t < 0.9
    with pytest.raises(ValueError, match="threshold metric"):
        choose_threshold(scores, np.array([1, 0, 0]), metric="recall")


def test_choose_threshold_for_scores_outside_unit_range():
    # benchmark() accepts any similarity function, e.g. an unnormalised dot product.
    scores, labels = np.array([5.0, 4.0, 3.0]), np.array([0, 0, 0])
    t, choice = choose_threshold(scores, labels)
    assert metrics.accuracy_score(labels, scores > t) == choice["value"] == 1.0


# -- LazyAdam -----------------------------------------------------------------------------------


def adam_reference(grads: list[np.ndarray], lr=0.01, b1=0.9, b2=0.999, eps=1e-7, t_offset=0) -> float:
    """Total Adam displacement of one scalar given its gradient at each step it was touched."""
    m = v = 0.0
    total = 0.0
    for k, g in enumerate(grads, 1 + t_offset):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        total -= lr * (m / (1 - b1**k)) / (math.sqrt(v / (1 - b2**k)) + eps)
    return total


@pytest.fixture(
    params=[pytest.param(True, marks=pytest.mark.slow), False],  # slow: the C++ kernel's build
    ids=["kernel", "pytorch-ops"],
)
def adam_path(request, monkeypatch):
    """LazyAdam through the compiled one-pass loop, then through PyTorch ops."""
    monkeypatch.setenv("SIAMESE_KERNELS", "1" if request.param else "0")
    if request.param and kernels.load() is None:
        pytest.skip("siamese's C++ kernels do not build here")


def test_lazy_adam_updates_only_rows_in_the_sparse_gradient(adam_path):
    """The same update from the compiled one-pass loop and from PyTorch ops."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4, sparse=True)
    start = emb.weight.detach().clone()
    opt = LazyAdam(emb.parameters(), lr=0.01)

    def step(ids, scale):
        opt.zero_grad(set_to_none=True)
        (emb(torch.tensor(ids)) * scale).sum().backward()
        assert emb.weight.grad.is_sparse
        opt.step()

    step([1, 3, 3], 1.0)  # row 3 twice: its gradient is 2 (summed by coalesce)
    after1 = emb.weight.detach().clone()
    changed = (after1 != start).any(1).nonzero().flatten().tolist()
    assert changed == [1, 3]
    torch.testing.assert_close(after1[1] - start[1], torch.full((4,), adam_reference([1.0])), rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(after1[3] - start[3], torch.full((4,), adam_reference([2.0])), rtol=1e-4, atol=1e-7)

    step([5], -1.0)  # rows 1 and 3 are not in this gradient: their moments must not move them
    after2 = emb.weight.detach().clone()
    changed = (after2 != after1).any(1).nonzero().flatten().tolist()
    assert changed == [5]
    # the bias correction uses the optimiser's step count (2), as lazy Adam does
    torch.testing.assert_close(
        after2[5] - start[5], torch.full((4,), adam_reference([-1.0], t_offset=1)), rtol=1e-4, atol=1e-7
    )

    step([1], 1.0)  # row 1 again: its moments continue from step 1
    m1 = 0.1 * 1.0
    v1 = 0.001 * 1.0
    m = 0.9 * m1 + 0.1
    v = 0.999 * v1 + 0.001
    delta = -0.01 * (m / (1 - 0.9**3)) / (math.sqrt(v / (1 - 0.999**3)) + 1e-7)
    torch.testing.assert_close(emb.weight.detach()[1] - after2[1], torch.full((4,), delta), rtol=1e-4, atol=1e-7)
    untouched = [0, 2, 4, 6, 7, 8, 9]
    assert torch.equal(emb.weight.detach()[untouched], start[untouched])


def test_lazy_adam_stays_finite_when_the_second_moment_is_denormal(adam_path):
    """Was: the kernel's approximate square root made NaN of a gradient ~4e-20 (its square is a
    denormal float), which killed a two-worker training on an AVX2 host at its 7th step."""
    p = torch.nn.Parameter(torch.ones(4, 300))
    opt = LazyAdam([p], lr=0.01)
    for t, g in enumerate([3.97e-20, 1e-22, 2e-19, 0.0], 1):
        p.grad = torch.sparse_coo_tensor(
            torch.tensor([[0, 2]]), torch.full((2, 300), g), (4, 300), check_invariants=True
        )
        opt.step()
        assert torch.isfinite(p.detach()).all(), f"step {t}"
    expected = adam_reference([3.97e-20, 1e-22, 2e-19, 0.0])
    torch.testing.assert_close(p.detach()[[0, 2]] - 1, torch.full((2, 300), expected), rtol=1e-3, atol=1e-6)
    assert torch.equal(p.detach()[[1, 3]], torch.ones(2, 300))


def test_lazy_adam_skips_parameters_without_gradient():
    p = torch.nn.Parameter(torch.ones(3, 2))
    LazyAdam([p]).step()
    assert torch.equal(p.detach(), torch.ones(3, 2))


def test_a_diverging_run_stops_with_a_reason(small_pairs, small_val):
    # Was: NaN losses never beat the best score, so no best weights were kept and loading them crashed.
    # Which loss shows it first depends on the CPU's path (fp32 or the bf16 kernel): either is a reason.
    with pytest.raises(ConfigError, match="training diverged: the (validation )?loss is nan at epoch 1"):
        quick(small_pairs, small_val, lr=float("inf"))


def test_trainer_keeps_the_epoch_best_on_the_monitored_metric_either_way():
    """validate() may give a dict of metrics: the best epoch is the monitored one's highest
    (maximize) or lowest, and its weights are the ones kept."""
    import numpy as np
    import torch

    from siamese.training.loop import Trainer

    def run(monitor: str, maximize: bool):
        torch.manual_seed(0)
        module = torch.nn.Linear(2, 1)
        trainer = Trainer(
            module,
            [torch.optim.SGD(module.parameters(), lr=0.1)],
            epochs=4,
            rng=np.random.default_rng(0),
            progress=False,
        )
        accuracy = iter([0.5, 0.9, 0.7, 0.6])  # best at epoch 2
        loss = iter([0.4, 0.3, 0.2, 0.25])  # best at epoch 3
        weights = []

        def validate():
            weights.append(module.weight.detach().clone())
            return {"val_accuracy": next(accuracy), "val_loss": next(loss)}

        fitted = trainer.fit(
            lambda rng: [torch.ones(3, 2)],
            lambda x: module(x).pow(2).mean(),
            validate=validate,
            monitor=monitor,
            maximize=maximize,
        )
        return fitted, weights

    fitted, weights = run("val_accuracy", True)
    assert fitted.best_epoch == 2 and fitted.best_score == 0.9
    assert torch.equal(fitted.best_weights["weight"], weights[1])
    assert [set(r) >= {"loss", "val_loss", "val_accuracy", "items", "items_per_second"} for r in fitted.history] == [
        True
    ] * 4
    fitted, weights = run("val_loss", False)
    assert fitted.best_epoch == 3 and torch.equal(fitted.best_weights["weight"], weights[2])
