"""SEED training throughput at d=384, batch 512, against the machine's float32 matmul peak.

Run:  .venv/bin/python benchmarks/bench_train_speed.py [--pairs 100000] [--epochs 3] [--out FILE]

Training data are random unit vectors with 12 language ids (the speed of one
linear layer does not depend on what the vectors mean). The matmul peak is the
best of several (4096 x 4096) @ (4096 x 4096) float32 products in the same run.
The useful work of one training pair is counted as 8 d^2 FLOPs: forward 2 d^2 and
weight gradient 2 d^2, for each of the two sentences.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch

from disembed.hardware import configure_threads, probe
from disembed.methods import make_method


def matmul_peak(n: int = 4096, repeats: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ["DISEMBED_PROGRESS"] = "0"
    rng = np.random.default_rng(0)
    src = rng.standard_normal((args.pairs, args.dim)).astype(np.float32)
    tgt = rng.standard_normal((args.pairs, args.dim)).astype(np.float32)
    langs = rng.choice([f"l{i}" for i in range(12)], args.pairs)
    langs = np.array([["de", "zh", "ro", "et", "ne", "si", "ar", "es", "tr", "fr", "it", "nl"][
        int(x[1:])] for x in langs], dtype=object)
    peak_before = matmul_peak()
    model = make_method("seed", batch_size=args.batch, max_epochs=args.epochs, patience=100)
    model.fit(src, tgt, langs, "en")
    peak_after = matmul_peak()
    rate = model.history_.pairs_per_second
    peak = max(peak_before, peak_after)
    achieved = rate * 8 * args.dim**2
    result = {
        "pairs": args.pairs, "dim": args.dim, "batch": args.batch, "epochs": args.epochs,
        "train_pairs_per_second": round(rate),
        "per_epoch_pairs_per_second": [round(e["pairs_per_second"]) for e in model.history_.epochs],
        "matmul_peak_gflops": round(peak / 1e9, 1),
        "achieved_gflops": round(achieved / 1e9, 1),
        "ratio_to_peak": round(achieved / peak, 3),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(), "loadavg": os.getloadavg(),
        "probe": probe().to_dict(), "thread_settings": configure_threads().to_dict(),
    }
    print("| pairs/s | GFLOP/s achieved | fp32 matmul peak GFLOP/s | ratio |")
    print("|---:|---:|---:|---:|")
    print(f"| {rate:,.0f} | {achieved / 1e9:.1f} | {peak / 1e9:.1f} | {achieved / peak:.1%} |")
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
