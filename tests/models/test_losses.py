"""The hard-negative triplet loss against a worked example and a loop-by-loop re-implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from siamese.models.losses import LOSSES, TripletLoss, triplet_loss

# A worked example (two pairs; the second pair's vectors point in opposite directions).
V1 = [[0.26726124, 0.53452248, 0.80178373], [0.5178918, 0.57543534, 0.63297887]]
V2 = [[0.26726124, 0.53452248, 0.80178373], [-0.5178918, -0.57543534, -0.63297887]]
SEED_LOSS = 0.7035


def reference_loss(v1: np.ndarray, v2: np.ndarray, margin: float = 0.25, negatives_of=None) -> float:
    """The definition (summed over rows), one row and one column at a time.

    scores[i, j] = v2[i] . v1[j] (or, with ``negatives_of``, anchor v1[i] against the positives
    v2 and the explicit negatives); the positive of row i is scores[i, i]; its negatives are the
    other entries of the row (the diagonal counts as 0 in the mean). The closest
    negative is the largest negative not above the positive; entries that are excluded (the
    diagonal, and negatives above the positive) take part only after being lowered by 2, which
    puts them below every allowed negative.
    """
    n = len(v1)
    total = 0.0
    for i in range(n):
        positive = float(np.dot(v2[i], v1[i]))
        if negatives_of is None:
            negatives = [float(np.dot(v2[i], v1[j])) for j in range(n) if j != i]
        else:
            candidates = [*v2, *negatives_of]
            negatives = [float(np.dot(v1[i], c)) for j, c in enumerate(candidates) if j != i]
        mean_negative = sum(negatives) / len(negatives)
        candidates = [-2.0]  # the diagonal: 0 - 2
        for s in negatives:
            candidates.append(s - 2.0 if s > positive else s)
        closest_negative = max(candidates)
        total += max(0.0, margin - positive + closest_negative) + max(0.0, margin - positive + mean_negative)
    return total


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_seed_example():
    # Summed over the batch here; training averages (the same loss per pair whatever the batch size).
    assert triplet_loss(V1, V2, reduction="sum").item() == pytest.approx(SEED_LOSS, abs=1e-4)
    assert triplet_loss(torch.tensor(V1), torch.tensor(V2), reduction="sum").item() == pytest.approx(
        SEED_LOSS, abs=1e-4
    )
    assert triplet_loss(V1, V2).item() == pytest.approx(SEED_LOSS / 2, abs=1e-4)
    assert reference_loss(np.array(V1), np.array(V2)) == pytest.approx(SEED_LOSS, abs=1e-4)
    with pytest.raises(ValueError, match="reduction"):
        triplet_loss(V1, V2, reduction="max")


def test_training_loss_averages_over_the_batch():
    # Was: a sum, so its gradient (and step, before Adam's normalisation) grew with the batch size.
    rng = np.random.default_rng(7)
    for n in (4, 64):
        v1, v2 = torch.tensor(unit_rows(rng, n, 8)), torch.tensor(unit_rows(rng, n, 8))
        assert TripletLoss()(v1, v2).item() == pytest.approx(reference_loss(v1.numpy(), v2.numpy()) / n, rel=1e-9)


def test_explicit_negatives_are_used():
    # Was: TripletLoss ignored `negative` (answer triplets with --loss triplet lost their negatives).
    rng = np.random.default_rng(3)
    v1 = unit_rows(rng, 5, 6)
    v2 = unit_rows(rng, 5, 6) * 0.4 + v1
    v2 /= np.linalg.norm(v2, axis=1, keepdims=True)
    hard = v1 + unit_rows(rng, 5, 6) * 0.6  # a negative close to each anchor, below its positive
    hard /= np.linalg.norm(hard, axis=1, keepdims=True)
    a, b, neg = (torch.tensor(x) for x in (v1, v2, hard))
    with_neg = TripletLoss()(a, b, negative=neg).item()
    assert with_neg == pytest.approx(reference_loss(v1, v2, negatives_of=hard) / 5, rel=1e-9)
    assert with_neg > TripletLoss()(a, b).item()


def test_module_form_matches_function_and_margin_matters():
    v1, v2 = torch.tensor(V1), torch.tensor(V2)
    assert TripletLoss()(v1, v2).item() == pytest.approx(triplet_loss(v1, v2).item())
    assert LOSSES["triplet"] is TripletLoss
    assert TripletLoss(margin=0.5)(v1, v2).item() == pytest.approx(reference_loss(np.array(V1), np.array(V2), 0.5) / 2)
    assert TripletLoss(margin=0.5)(v1, v2).item() > TripletLoss(margin=0.25)(v1, v2).item()


@pytest.mark.parametrize("n", [2, 3, 5, 16, 33])
@pytest.mark.parametrize("d", [3, 8])
def test_matches_reference_on_random_unit_vectors(n, d):
    rng = np.random.default_rng(1000 * n + d)
    for _ in range(5):
        v1 = unit_rows(rng, n, d)
        # Positives that are noisy copies of v1, so every branch (above/below positive) occurs.
        v2 = unit_rows(rng, n, d) * 0.5 + v1 * rng.uniform(0, 1.5)
        v2 /= np.linalg.norm(v2, axis=1, keepdims=True)
        got = triplet_loss(torch.from_numpy(v1), torch.from_numpy(v2), reduction="sum").item()
        assert got == pytest.approx(reference_loss(v1, v2), rel=1e-9, abs=1e-9)


def test_exact_duplicates_well_separated_give_zero_loss():
    # Orthogonal texts whose duplicates are identical: positive 1, negatives 0 -> both hinges are 0.
    v = np.eye(4)
    assert triplet_loss(v, v).item() == pytest.approx(0.0)


def test_gradient_flows_to_both_sides():
    rng = np.random.default_rng(0)
    v1 = torch.tensor(unit_rows(rng, 6, 4), requires_grad=True)
    v2 = torch.tensor(unit_rows(rng, 6, 4), requires_grad=True)
    loss = triplet_loss(v1, v2)
    assert loss.item() > 0
    loss.backward()
    for v in (v1, v2):
        assert v.grad is not None
        assert torch.isfinite(v.grad).all()
        assert v.grad.abs().sum() > 0
    # A small step against the gradient lowers the loss.
    with torch.no_grad():
        lower = triplet_loss(v1 - 1e-3 * v1.grad, v2 - 1e-3 * v2.grad)
    assert lower.item() < loss.item()


def test_batch_of_one_is_rejected():
    with pytest.raises(ValueError, match="at least 2"):
        triplet_loss([[1.0, 0.0]], [[1.0, 0.0]])


def test_cosent_hand_computed_and_graded():
    from siamese.models.losses import CoSENTLoss

    a = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[0.9, (1 - 0.81) ** 0.5], [0.2, (1 - 0.04) ** 0.5]])  # cosines 0.9 and 0.2
    loss = CoSENTLoss()
    # gold orders pair 0 above pair 1, as the model does: log(1 + exp(20 * (0.2 - 0.9)))
    assert loss(a, b, labels=torch.tensor([4.5, 1.0])).item() == pytest.approx(np.log1p(np.exp(-14.0)), abs=1e-6)
    # gold says the opposite: log(1 + exp(14))
    assert loss(a, b, labels=torch.tensor([0.0, 1.0])).item() == pytest.approx(np.log1p(np.exp(14.0)), rel=1e-5)
    # ties in gold carry no order: nothing to pay
    assert loss(a, b, labels=torch.tensor([1.0, 1.0])).item() == pytest.approx(0.0, abs=1e-7)
