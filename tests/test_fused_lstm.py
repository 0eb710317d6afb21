"""FusedLSTM (native AVX512-BF16 kernel) against nn.LSTM: outputs and every gradient."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from siamese.kernels.fused_lstm import FusedLSTM, available, load_error

pytestmark = pytest.mark.skipif(not available(), reason=f"fused LSTM kernel unavailable: {load_error()}")

SHAPES = [(1, 1), (7, 1), (13, 5), (6, 8), (37, 17), (64, 24)]  # (n, T); n not a multiple of 6 or 16


def _pair(dim: int, hidden: int, seed: int = 0):
    torch.manual_seed(seed)
    ref = nn.LSTM(dim, hidden, batch_first=True)
    fused = FusedLSTM(dim, hidden)
    fused.load_state_dict(ref.state_dict())  # same names and shapes both ways
    ref.load_state_dict(fused.state_dict())
    return ref, fused


def _run(module, x, gout, autocast=False):
    module.zero_grad()
    x = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out, _ = module(x)
    (out.float() * gout).sum().backward()
    grads = {name: p.grad.clone() for name, p in module.named_parameters()}
    return out.detach().float(), x.grad.clone(), grads


def _rel(a, b):
    return ((a - b).norm() / b.norm().clamp(min=1e-12)).item()


@pytest.mark.parametrize("n,T", SHAPES)
@pytest.mark.parametrize("dim,hidden", [(128, 128), (32, 48)])
def test_matches_fp32_lstm(n, T, dim, hidden):
    ref, fused = _pair(dim, hidden)
    x = torch.randn(n, T, dim)
    gout = torch.randn(n, T, hidden)
    o_ref, dx_ref, g_ref = _run(ref, x, gout)
    o, dx, g = _run(fused, x, gout)
    assert o.dtype == torch.float32 and o.shape == o_ref.shape
    assert (o - o_ref).abs().max().item() < 2e-2
    assert _rel(dx, dx_ref) < 1e-2
    for name in g_ref:
        if T == 1 and name == "weight_hh_l0":  # h_{-1} = 0: gradient exactly zero
            assert g[name].abs().max().item() == 0.0 and g_ref[name].abs().max().item() == 0.0
            continue
        assert _rel(g[name], g_ref[name]) < 1e-2, name
        assert g[name].dtype == torch.float32


@pytest.mark.parametrize("n,T", [(13, 5), (64, 24)])
def test_matches_lstm_under_bf16_autocast(n, T):
    ref, fused = _pair(128, 128, seed=1)
    x = torch.randn(n, T, 128)
    gout = torch.randn(n, T, 128)
    o_ref, dx_ref, g_ref = _run(ref, x, gout, autocast=True)
    o, dx, g = _run(fused, x, gout, autocast=True)
    assert (o - o_ref).abs().max().item() < 2e-2
    assert _rel(dx, dx_ref) < 1e-2
    for name in g_ref:
        assert _rel(g[name], g_ref[name]) < 1e-2, name


def test_bf16_input_and_zero_length_batch():
    ref, fused = _pair(128, 128)
    x = torch.randn(9, 4, 128)
    o_ref, _ = ref(x)
    xb = x.bfloat16().requires_grad_(True)
    o, _ = fused(xb)
    assert (o - o_ref).abs().max().item() < 3e-2
    o.sum().backward()
    assert xb.grad.dtype == torch.bfloat16 and xb.grad.shape == xb.shape
    empty, _ = fused(torch.randn(0, 3, 128))
    assert empty.shape == (0, 3, 128)


def test_directional_finite_difference():
    """d/de L(x + e v, W + e V) by central differences vs the autograd directional derivative."""
    torch.manual_seed(3)
    fused = FusedLSTM(16, 16)
    x = torch.randn(3, 4, 16)
    gout = torch.randn(3, 4, 16)
    vx = torch.randn_like(x)
    vw = {k: torch.randn_like(p) * 0.3 for k, p in fused.named_parameters()}
    base = {k: p.detach().clone() for k, p in fused.named_parameters()}

    def loss(eps):
        with torch.no_grad():
            for k, p in fused.named_parameters():
                p.copy_(base[k] + eps * vw[k])
        out, _ = fused(x + eps * vx)
        return (out * gout).sum().double().item()

    eps = 2e-2
    fd = (loss(eps) - loss(-eps)) / (2 * eps)
    with torch.no_grad():
        for k, p in fused.named_parameters():
            p.copy_(base[k])
    fused.zero_grad()
    xg = x.clone().requires_grad_(True)
    out, _ = fused(xg)
    (out * gout).sum().backward()
    ad = (xg.grad * vx).sum().item() + sum((p.grad * vw[k]).sum().item() for k, p in fused.named_parameters())
    assert abs(fd - ad) <= 0.03 * abs(ad) + 1e-2, (fd, ad)


def test_threads_give_same_result():
    ref, fused = _pair(128, 128)
    x = torch.randn(50, 7, 128)
    gout = torch.randn(50, 7, 128)
    prev = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        o1, dx1, g1 = _run(fused, x, gout)
        torch.set_num_threads(2)
        o2, dx2, g2 = _run(fused, x, gout)
    finally:
        torch.set_num_threads(prev)
    assert torch.equal(o1, o2) and torch.equal(dx1, dx2)
    for name in g1:
        assert torch.allclose(g1[name], g2[name], rtol=1e-5, atol=1e-6), name


def test_unsupported_shape_falls_back_to_aten():
    torch.manual_seed(0)
    ref = nn.LSTM(20, 12, batch_first=True)
    fused = FusedLSTM(20, 12)
    fused.load_state_dict(ref.state_dict())
    x = torch.randn(4, 5, 20)
    assert torch.allclose(fused(x)[0], ref(x)[0], atol=1e-6)
