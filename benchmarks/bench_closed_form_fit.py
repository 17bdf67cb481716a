"""Fit time of the closed-form recipes on random pairs shaped like the default bench.

Run:  OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/bench_closed_form_fit.py \
          --pairs 6000 --dim 512 --languages 12

``pairs`` translation pairs, the source side spread over ``languages`` languages, the
target side English (so ``languages + 1`` languages in all), float32 Gaussian embeddings.
Prints one line per method with the best of ``--repeats`` wall-clock fits and the load
average, which the figures depend on.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from disembed.methods import make_method


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=6000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--languages", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default="mean-centering,lir,lsar,leace")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    src = rng.standard_normal((args.pairs, args.dim)).astype(np.float32)
    tgt = rng.standard_normal((args.pairs, args.dim)).astype(np.float32)
    src_lang = [f"l{i % args.languages}" for i in range(args.pairs)]
    print(f"{args.pairs} pairs, dim {args.dim}, {args.languages} + 1 languages, "  # noqa: T201
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    for name in args.methods.split(","):
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            make_method(name).fit(src, tgt, src_lang, "en")
            times.append(time.perf_counter() - t0)
        print(f"{name}: best {min(times):.3f} s of {args.repeats}")  # noqa: T201
    print(f"loadavg {os.getloadavg()}")  # noqa: T201


if __name__ == "__main__":
    main()
