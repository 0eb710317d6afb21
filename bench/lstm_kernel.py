"""Micro-benchmark: LSTM(128->128) forward+backward, one thread, 256 rows, bf16 autocast.

Prints ms per time step per 256 rows (median of repeats) for nn.LSTM under
torch.autocast("cpu", bfloat16) and for siamese.kernels.fused_lstm.FusedLSTM.

    python bench/lstm_kernel.py [--rows 256] [--repeats 15] [--T 8 13 17 24]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from siamese.kernels.fused_lstm import FusedLSTM, available, load_error


def step_ms(module: nn.Module, x: torch.Tensor, repeats: int, warmup: int = 3) -> tuple[float, float]:
    """Median ms per time step for (fwd+bwd, fwd only)."""
    T = x.shape[1]

    def fwd():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = module(x)
        return out

    def fwd_bwd():
        out = fwd()
        out.float().sum().backward()

    for _ in range(warmup):
        fwd_bwd()
    both, only = [], []
    for _ in range(repeats):  # interleave fwd+bwd and fwd-only samples
        t0 = time.perf_counter()
        fwd_bwd()
        t1 = time.perf_counter()
        with torch.no_grad():
            fwd()
        t2 = time.perf_counter()
        both.append((t1 - t0) * 1e3 / T)
        only.append((t2 - t1) * 1e3 / T)
    return statistics.median(both), statistics.median(only)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--T", type=int, nargs="+", default=[8, 13, 17, 24])
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    ok = available()
    print(f"fused kernel available: {ok} (load/build {time.perf_counter() - t0:.1f}s)"
          + ("" if ok else f" -- {load_error()}"))
    ref = nn.LSTM(args.dim, args.dim, batch_first=True)
    fused = FusedLSTM(args.dim, args.dim)
    fused.load_state_dict(ref.state_dict())
    print(f"rows={args.rows} dim={args.dim} threads={torch.get_num_threads()}  ms/step/{args.rows} rows (median)")
    print(f"{'T':>3} | {'nn.LSTM fwd+bwd':>15} {'fwd':>6} | {'Fused fwd+bwd':>13} {'fwd':>6} | speedup")
    for T in args.T:
        x = torch.randn(args.rows, T, args.dim, requires_grad=True)
        a_fb, a_f = step_ms(ref, x, args.repeats)
        b_fb, b_f = step_ms(fused, x, args.repeats) if ok else (float("nan"), float("nan"))
        print(f"{T:>3} | {a_fb:>15.3f} {a_f:>6.3f} | {b_fb:>13.3f} {b_f:>6.3f} | {a_fb / b_fb:.2f}x")


if __name__ == "__main__":
    main()
