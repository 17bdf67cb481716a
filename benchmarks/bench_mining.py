"""Margin-mining k-NN speed: our exact backend vs faiss IndexFlatIP, with the product as floor.

    PYTHONPATH=src nice -n 5 python benchmarks/bench_mining.py --n 100000 --dim 384 \
        --workdir /tmp/bench_mining --out runs/bench_mining.json

Both directions, k=4, on random unit vectors (seeded). Each phase runs in its own
process (so its peak RSS is its own): ``matmul`` (the full product ``x @ y.T`` block
by block into a reused buffer, no selection: the lower bound of any exact method that
reads every product once), ``exact`` (ours: one pass of products serves both
directions), optionally ``exact-bf16``, and ``faiss-flat`` (two IndexFlatIP searches).
Agreement: rows whose top-4 index set equals faiss', and for the others whether the
similarities agree (ties).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def data(workdir: Path, n: int, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    paths = [workdir / f"{name}-{rows}x{d}.npy" for name, rows in (("x", n), ("y", m))]
    for seed, (path, rows) in enumerate(zip(paths, (n, m), strict=True)):
        if not path.exists():
            v = np.random.default_rng(seed).standard_normal((rows, d), dtype=np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            np.save(path, v)
    return np.load(paths[0], mmap_mode="r"), np.load(paths[1], mmap_mode="r")


def phase(name: str, x: np.ndarray, y: np.ndarray, k: int, workdir: Path) -> dict:
    import torch

    t0 = time.perf_counter()
    if name == "matmul":
        from disembed.retrieval.knn import KnnOptions

        opt = KnnOptions()
        buf = torch.empty(opt.block_rows, opt.block_cols)
        for r0 in range(0, len(x), opt.block_rows):
            xb = torch.from_numpy(np.array(x[r0 : r0 + opt.block_rows]))
            for c0 in range(0, len(y), opt.block_cols):
                yb = torch.from_numpy(np.array(y[c0 : c0 + opt.block_cols]))
                torch.mm(xb, yb.T, out=buf[: len(xb), : len(yb)])
        lists = None
    elif name.startswith("exact"):
        from disembed.mining import search_both

        lists = search_both(x, y, k, name)
    else:
        from disembed.mining import search_both

        lists = search_both(x, y, k, "faiss-flat")
    seconds = time.perf_counter() - t0
    if lists is not None:
        np.savez(workdir / f"{name}.npz", *lists)
    return {"phase": name, "seconds": round(seconds, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "threads": torch.get_num_threads()}


def agreement(a: Path, b: Path) -> dict:
    A, B = np.load(a), np.load(b)
    out = {}
    for name, (d, i) in (("x->y", (0, 1)), ("y->x", (2, 3))):
        Da, Ia, Db, Ib = A[f"arr_{d}"], A[f"arr_{i}"], B[f"arr_{d}"], B[f"arr_{i}"]
        same_set = (np.sort(Ia, 1) == np.sort(Ib, 1)).all(1)
        same_sims = np.abs(Da - Db).max(1) <= 1e-5
        out[name] = {"rows": len(Ia), "same_top_k_set": float(same_set.mean()),
                     "differ_but_equal_similarities": int((~same_set & same_sims).sum()),
                     "differ_in_similarity": int((~same_sims).sum()),
                     "max_abs_similarity_diff": float(np.abs(Da - Db).max())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100000, help="rows per side")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--phases", default="matmul,exact,faiss-flat")
    ap.add_argument("--workdir", default="/tmp/bench_mining")
    ap.add_argument("--out", default=None)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    x, y = data(workdir, args.n, args.n, args.dim)
    if args.phase:
        print(json.dumps(phase(args.phase, x, y, args.k, workdir)))  # noqa: T201
        return
    report = {"n": args.n, "dim": args.dim, "k": args.k, "cpus": os.cpu_count(),
              "load_before": os.getloadavg(), "phases": []}
    for name in args.phases.split(","):
        cmd = [sys.executable, __file__, "--n", str(args.n), "--dim", str(args.dim), "--k",
               str(args.k), "--workdir", str(workdir), "--phase", name]
        line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        result = json.loads(line.strip().splitlines()[-1])
        result["load_after"] = os.getloadavg()
        report["phases"].append(result)
        print(json.dumps(result), flush=True)  # noqa: T201
    secs = {p["phase"]: p["seconds"] for p in report["phases"]}
    if "exact" in secs:
        report["ratios"] = {f"{name}/exact": round(s / secs["exact"], 2)
                            for name, s in secs.items() if name != "exact"}
    if (workdir / "exact.npz").exists() and (workdir / "faiss-flat.npz").exists():
        report["agreement_exact_vs_faiss"] = agreement(workdir / "exact.npz",
                                                        workdir / "faiss-flat.npz")
    print(json.dumps(report, indent=1))  # noqa: T201
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
