"""The fused bf16 LSTM training kernel against nn.LSTM, on real question batches."""

from __future__ import annotations

import gc
import threading

import pytest
import torch

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.data.vocabulary import pad
from siamese.models.encoders import fused_lstm
from siamese.models.encoders.lstm import LSTMEncoder
from siamese.runtime import kernels
from siamese.runtime.parallel import ParallelEncoder
from siamese.training.bi_encoder import gc_frozen

NATIVE_BF16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
needs_kernel = pytest.mark.skipif(
    not NATIVE_BF16, reason="this CPU has no native bfloat16 (AVX512-BF16/AMX): the fused kernel is not used"
)


@pytest.fixture(scope="module")
def batch(data_dir):
    """128 real questions (varied lengths, unknown words, 1-token texts) as padded ids."""
    pairs = datasets.load("quora-sample", data_dir)
    model = SiameseModel.build(pairs.text1[:150], ModelConfig(seed=0))  # the rest have unknown words
    texts = pairs.text1[100:200] + pairs.text2[100:125] + ["why", "hello?", "zebra"]
    ids, lengths = pad(model.vectorizer.encode(texts))
    return model.vectorizer.vocab_size, torch.from_numpy(ids), torch.from_numpy(lengths)


def gradients(encoder, ids, lengths, weights, bf16: bool):
    encoder.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = encoder(ids, lengths).float()
    (out * weights).sum().backward()
    grads = {k: p.grad.to_dense() if p.grad.is_sparse else p.grad.clone() for k, p in encoder.named_parameters()}
    return out.detach(), grads


def relative_error(a, b):
    return float((a - b).norm() / b.norm())


@needs_kernel
@pytest.mark.parametrize("sparse", [True, False])
def test_fused_kernel_matches_nn_lstm(batch, sparse, monkeypatch):
    vocab, ids, lengths = batch
    torch.manual_seed(0)
    encoder = LSTMEncoder(vocab, sparse_embedding=sparse)
    weights = torch.randn(len(ids), encoder.dim)
    reference, ref_grads = gradients(encoder, ids, lengths, weights, bf16=False)  # fp32 nn.LSTM

    calls = []
    real = fused_lstm.mean_states
    monkeypatch.setattr(fused_lstm, "mean_states", lambda *a: calls.append(1) or real(*a))
    out, grads = gradients(encoder, ids, lengths, weights, bf16=True)
    assert calls, "training under bf16 autocast should take the fused kernel"
    if sparse:
        encoder.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            encoder(ids, lengths).sum().backward()
        grad = encoder.embedding.weight.grad
        rows = grad._indices()[0].tolist()
        assert grad.is_sparse and sorted(rows) == torch.unique(ids).tolist()  # one row per distinct token
    monkeypatch.setenv("SIAMESE_KERNELS", "0")
    out_onednn, grads_onednn = gradients(encoder, ids, lengths, weights, bf16=True)  # nn.LSTM under bf16 autocast
    assert len(calls) == 1 + sparse

    # bf16 matmuls: errors of a few 1e-3, no larger than those of nn.LSTM under the same autocast
    assert relative_error(out, reference) < 0.01
    assert relative_error(out, reference) < 2 * relative_error(out_onednn, reference)
    for name, g in grads.items():
        assert relative_error(g, ref_grads[name]) < 0.02, name
        assert relative_error(g, ref_grads[name]) < 2 * relative_error(grads_onednn[name], ref_grads[name]), name
    assert torch.count_nonzero(grads["embedding.weight"][0]) == 0  # the padding row never learns


@needs_kernel
def test_padding_does_not_change_the_result(batch):
    """Extra padding columns and rows' order do not matter: the kernel works on real tokens only."""
    vocab, ids, lengths = batch
    torch.manual_seed(1)
    encoder = LSTMEncoder(vocab)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = encoder(ids, lengths)
        padded = torch.cat([ids, torch.zeros(len(ids), 7, dtype=ids.dtype)], 1)
        perm = torch.randperm(len(ids))
        shuffled = encoder(padded[perm], lengths[perm])
    assert torch.allclose(shuffled, out[perm], atol=1e-5)


@needs_kernel
def test_training_in_bf16_uses_the_kernel_and_learns(data_dir, monkeypatch):
    calls = []
    real = fused_lstm.mean_states
    monkeypatch.setattr(fused_lstm, "mean_states", lambda *a: calls.append(threading.get_ident()) or real(*a))
    pairs = datasets.load("paws-qqp-train", data_dir)
    model = train(pairs, config=TrainConfig(epochs=2, precision="bf16", seed=0), progress=False)
    assert len(calls) >= 2 * 15  # every batch of both epochs (15 batches of 256 duplicates)
    history = model.info["training"]["history"]
    assert history[1]["loss"] < history[0]["loss"]
    test = datasets.load("quora-sample", data_dir)
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(test.labels, model.similarity_pairwise(test.text1, test.text2)) > 0.6


def test_switching_the_kernel_off_keeps_nn_lstm(batch, monkeypatch):
    vocab, ids, lengths = batch
    monkeypatch.setenv("SIAMESE_KERNELS", "0")
    encoder = LSTMEncoder(vocab)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=NATIVE_BF16):
        assert not fused_lstm.usable(encoder.lstm)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=NATIVE_BF16):
        assert not fused_lstm.usable(encoder.lstm)  # inference stays with nn.LSTM


def test_worker_threads_run_single_threaded_ops(batch):
    """Each length group's thread keeps its ops on one thread: two workers with OpenMP's default
    two threads each oversubscribe the two cores."""
    vocab, _, _ = batch
    runner = ParallelEncoder(LSTMEncoder(vocab), workers=2)
    try:
        threads = runner.pool.submit(torch.get_num_threads).result()
    finally:
        runner.close()
    assert threads == 1


def test_gc_frozen_restores_the_collector():
    assert gc.get_freeze_count() == 0
    with gc_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_frozen():
            pass
        assert gc.get_freeze_count() >= frozen  # a caller's own freeze is left alone
    finally:
        gc.unfreeze()


def test_unusable_compiler_falls_back_with_one_warning(monkeypatch, tmp_path):
    """No compiler: a warning naming the reason, and nn.LSTM keeps training."""
    kernels._build.cache_clear()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    try:
        with pytest.warns(UserWarning, match="C.. kernels are unavailable"):
            assert kernels.load() is None
        encoder = LSTMEncoder(50)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=NATIVE_BF16):
            assert not fused_lstm.usable(encoder.lstm)
    finally:
        kernels._build.cache_clear()


def test_kernel_math_on_any_cpu(batch):
    # The kernel's matmuls are at::mm in bf16, which every CPU runs (natively or emulated): its math
    # is checked here even where training would not take it (no native bf16).
    if kernels.load() is None:
        pytest.skip("no C++ compiler here: the kernels fall back to PyTorch ops")
    vocab, ids, lengths = batch
    if not NATIVE_BF16:  # emulated bf16 matmuls run at ~1 GFLOP/s: a sixth of the rows, the 1-token texts kept
        rows = torch.cat([torch.arange(0, len(ids) - 3, 6), torch.arange(len(ids) - 3, len(ids))])
        ids, lengths = ids[rows, : int(lengths[rows].max())].contiguous(), lengths[rows].contiguous()
    torch.manual_seed(0)
    encoder = LSTMEncoder(vocab, sparse_embedding=False, normalize=False)
    with torch.no_grad():
        states, _ = encoder.lstm(encoder.embedding(ids))
        mask = (torch.arange(ids.shape[1])[None] < lengths[:, None]).float()[..., None]
        reference = (states * mask).sum(1) / lengths[:, None].float()
    weights = torch.randn(len(ids), encoder.dim)
    out = fused_lstm.mean_states(encoder.embedding, encoder.lstm, ids, lengths)
    (out * weights).sum().backward()
    assert relative_error(out.detach(), reference) < 0.01
    assert encoder.lstm.weight_hh_l0.grad is not None and torch.isfinite(encoder.lstm.weight_hh_l0.grad).all()


def test_kernel_refuses_bad_inputs_instead_of_reading_out_of_bounds(batch):
    if kernels.load() is None:
        pytest.skip("no C++ compiler here: the kernels fall back to PyTorch ops")
    vocab, ids, lengths = batch
    encoder = LSTMEncoder(vocab, sparse_embedding=False)
    args = lambda ids, lengths: (
        encoder.embedding.weight.detach(),
        ids,
        lengths,
        encoder.lstm.weight_ih_l0.detach(),  # noqa: E731
        encoder.lstm.weight_hh_l0.detach(),
        (encoder.lstm.bias_ih_l0 + encoder.lstm.bias_hh_l0).detach(),
    )
    k = kernels.load()
    with pytest.raises(RuntimeError, match="ids must index rows of table"):
        k.lstm_forward(*args(ids + vocab, lengths))
    with pytest.raises(RuntimeError, match="length"):
        k.lstm_forward(*args(ids, lengths + ids.shape[1]))
    with pytest.raises(RuntimeError, match="lengths must hold one length"):
        k.lstm_forward(*args(ids, lengths[:-1]))
    with pytest.raises(RuntimeError, match="ids must be Long"):
        k.lstm_forward(*args(ids.int(), lengths))
    p = torch.zeros(10, 4)
    with pytest.raises(RuntimeError, match="rows must index rows of p"):
        k.lazy_adam_(
            p, torch.zeros_like(p), torch.zeros_like(p), torch.tensor([12]), torch.ones(1, 4), 0.1, 0.9, 0.999, 1e-8, 1
        )
