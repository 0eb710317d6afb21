"""The fused bf16 LSTM training kernel against nn.LSTM, on real question batches."""

from __future__ import annotations

import gc

import pytest
import torch
from sklearn.metrics import roc_auc_score

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.encoders import fused_lstm
from siamese.encoders.lstm import LSTMEncoder
from siamese.parallel import ParallelEncoder
from siamese.text import pad
from siamese.training import gc_frozen

NATIVE_BF16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
needs_bf16 = pytest.mark.skipif(not NATIVE_BF16, reason="this CPU has no native bfloat16 (AVX512-BF16/AMX)")


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


def spy(monkeypatch) -> list[str]:
    """Record the precision of every call to the fused kernel."""
    calls, real = [], fused_lstm.mean_states
    monkeypatch.setattr(fused_lstm, "mean_states", lambda *a: calls.append(a[-1]) or real(*a))
    return calls


def test_fp32_kernel_matches_nn_lstm(batch, monkeypatch):
    vocab, ids, lengths = batch
    torch.manual_seed(0)
    encoder = LSTMEncoder(vocab)
    weights = torch.randn(len(ids), encoder.dim)
    monkeypatch.setenv("SIAMESE_FUSED_LSTM", "0")
    reference, ref_grads = gradients(encoder, ids, lengths, weights, bf16=False)
    monkeypatch.setenv("SIAMESE_FUSED_LSTM", "1")
    calls = spy(monkeypatch)
    out, grads = gradients(encoder, ids, lengths, weights, bf16=False)
    assert calls == ["fp32"]
    assert relative_error(out, reference) < 1e-5  # the same math, summed in another order
    for name, g in grads.items():
        assert relative_error(g, ref_grads[name]) < 1e-5, name
    assert torch.count_nonzero(grads["embedding.weight"][0]) == 0  # the padding row never learns


@needs_bf16
@pytest.mark.parametrize("sparse", [True, False])
def test_bf16_kernel_matches_nn_lstm(batch, sparse, monkeypatch):
    vocab, ids, lengths = batch
    torch.manual_seed(0)
    encoder = LSTMEncoder(vocab, sparse_embedding=sparse)
    weights = torch.randn(len(ids), encoder.dim)
    monkeypatch.setenv("SIAMESE_FUSED_LSTM", "0")
    reference, ref_grads = gradients(encoder, ids, lengths, weights, bf16=False)  # fp32 nn.LSTM
    out_onednn, grads_onednn = gradients(encoder, ids, lengths, weights, bf16=True)  # nn.LSTM under bf16 autocast
    monkeypatch.setenv("SIAMESE_FUSED_LSTM", "1")
    calls = spy(monkeypatch)
    out, grads = gradients(encoder, ids, lengths, weights, bf16=True)
    assert calls == ["bf16"]

    # bf16 matmuls: errors of a few 1e-3, no larger than those of nn.LSTM under the same autocast
    assert relative_error(out, reference) < 0.01
    assert relative_error(out, reference) < 2 * relative_error(out_onednn, reference)
    for name, g in grads.items():
        assert relative_error(g, ref_grads[name]) < 0.02, name
        assert relative_error(g, ref_grads[name]) < 2 * relative_error(grads_onednn[name], ref_grads[name]), name
    assert torch.count_nonzero(grads["embedding.weight"][0]) == 0
    if sparse:
        encoder.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            encoder(ids, lengths).sum().backward()
        grad = encoder.embedding.weight.grad
        rows = grad._indices()[0].tolist()
        assert grad.is_sparse and sorted(rows) == torch.unique(ids).tolist()  # one row per distinct token


@pytest.mark.parametrize("bf16", [False, pytest.param(True, marks=needs_bf16)])
def test_padding_does_not_change_the_result(batch, bf16):
    """Extra padding columns and rows' order do not matter: the kernel works on real tokens only."""
    vocab, ids, lengths = batch
    torch.manual_seed(1)
    encoder = LSTMEncoder(vocab)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = encoder(ids, lengths)
        padded = torch.cat([ids, torch.zeros(len(ids), 7, dtype=ids.dtype)], 1)
        perm = torch.randperm(len(ids))
        shuffled = encoder(padded[perm], lengths[perm])
    assert torch.allclose(shuffled, out[perm], atol=1e-5)


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=needs_bf16)])
def test_training_uses_the_kernel_and_learns(data_dir, monkeypatch, precision):
    calls = spy(monkeypatch)
    pairs = datasets.load("paws-qqp-train", data_dir)
    model = train(pairs, config=TrainConfig(epochs=2, precision=precision, seed=0), progress=False)
    assert calls.count(precision) >= 2 * 15 and set(calls) == {precision}  # every batch of both epochs
    history = model.info["training"]["history"]
    assert history[1]["loss"] < history[0]["loss"]
    test = datasets.load("quora-sample", data_dir)
    assert roc_auc_score(test.labels, model.similarity(test.text1, test.text2)) > 0.6


def test_switching_the_kernel_off_keeps_nn_lstm(batch, monkeypatch):
    vocab, ids, lengths = batch
    monkeypatch.setenv("SIAMESE_FUSED_LSTM", "0")
    encoder = LSTMEncoder(vocab)
    assert fused_lstm.kernel_precision(encoder.lstm) is None
    monkeypatch.setenv("SIAMESE_FUSED_LSTM", "1")
    with torch.no_grad():
        assert fused_lstm.kernel_precision(encoder.lstm) is None  # inference stays with nn.LSTM
    bidirectional = torch.nn.LSTM(8, 8, batch_first=True, bidirectional=True)
    assert fused_lstm.kernel_precision(bidirectional) is None


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
    fused_lstm._extension.cache_clear()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    try:
        with pytest.warns(UserWarning, match="fused LSTM kernel unavailable"):
            assert fused_lstm._extension() is None
        assert fused_lstm.kernel_precision(LSTMEncoder(50).lstm) is None
    finally:
        fused_lstm._extension.cache_clear()
