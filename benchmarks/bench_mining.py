"""Margin-mining k-NN speed: our exact search vs the product floor and faiss, in one run.

    # quick check (20k x 20k, ~1 minute on 2 AVX2 cores):
    PYTHONPATH=src python benchmarks/bench_mining.py --preset quick --out /tmp/mining_quick.json
    # the figure of record (100k x 100k), on a quiet machine:
    PYTHONPATH=src python benchmarks/bench_mining.py --preset 100k --out /tmp/mining_100k.json
    # the 1M x 1M point (hours; see docs/benchmarks.md before starting it):
    PYTHONPATH=src python benchmarks/bench_mining.py --preset 1m --workdir /big/disk --out ...

Both directions, k=4, seeded random unit vectors (384-d). Each phase runs in its own
process, so its peak RSS is its own:

* ``matmul``: the full float32 product ``x @ y.T`` in our search's blocks (1024 x 4096)
  into a reused buffer, no selection: the floor of any exact method that reads every
  product once; ``matmul-big`` the same in 4096 x 16384 blocks (the floor measured
  before issue 12); ``matmul-bf16`` in bfloat16 (added where the probe measures
  bfloat16 faster, and then ``exact-fp32`` too). The floor is the fastest of them.
  ``--floor-fraction f`` times only the first ``f n`` rows of x and scales up.
* ``exact``: ours (``precision="auto"``: bfloat16 + certified float32 re-scoring where
  the probe says bfloat16 is faster, else float32); ``exact-fp32`` / ``exact-bf16``
  force a precision.
* ``faiss-flat``: two ``IndexFlatIP`` searches; ``faiss-ivf`` / ``faiss-hnsw``:
  approximate (two indexes each), with recall@k against exact lists of
  ``--recall-sample`` random rows of each side.

Every phase records the ``uptime`` load before and after it; the report records the
hardware probe (flags, calibration, threads) and the ratios: ours / floor (the fastest
product measured), faiss flat / ours, and the agreement of ours with faiss flat.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PRESETS = {
    "quick": {"n": 20_000, "phases": "matmul,matmul-big,exact,faiss-flat"},
    "100k": {"n": 100_000, "phases": "matmul,matmul-big,exact,faiss-flat"},
    "1m": {"n": 1_000_000, "phases": "matmul,exact,faiss-ivf",
           "floor_fraction": 0.05, "recall_sample": 2000},
}
BIG_BLOCKS = (4096, 16384)  # the floor's blocks before issue 12 (256 MB in float32)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return f"load average: {os.getloadavg()}"


def data(workdir: Path, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    paths = [workdir / f"{name}-{n}x{d}.npy" for name in ("x", "y")]
    for seed, path in enumerate(paths):
        if not path.exists():
            out = np.lib.format.open_memmap(path.with_suffix(".tmp.npy"), mode="w+",
                                            dtype=np.float32, shape=(n, d))
            rng = np.random.default_rng(seed)
            for s in range(0, n, 100_000):
                v = rng.standard_normal((min(100_000, n - s), d), dtype=np.float32)
                out[s : s + len(v)] = v / np.linalg.norm(v, axis=1, keepdims=True)
            out.flush()
            del out
            path.with_suffix(".tmp.npy").rename(path)
    return np.load(paths[0], mmap_mode="r"), np.load(paths[1], mmap_mode="r")


def floor(x, y, dtype_name: str, fraction: float, blocks: tuple[int, int]) -> float:
    """Seconds of the product of the first ``fraction`` of x with all of y, scaled to all x."""
    import torch

    dtype = getattr(torch, dtype_name)
    rows, cols = blocks
    buf = torch.empty(rows * cols, dtype=dtype)
    n = max(1, int(round(len(x) * fraction)))
    yt = torch.from_numpy(np.array(y, dtype=np.float32)).to(dtype)  # (m, d) in memory, as ours
    t0 = time.perf_counter()
    for r0 in range(0, n, rows):
        xb = torch.from_numpy(np.array(x[r0 : min(r0 + rows, n)])).to(dtype)
        for c0 in range(0, len(y), cols):
            yb = yt[c0 : c0 + cols]
            torch.mm(xb, yb.T, out=buf[: len(xb) * len(yb)].view(len(xb), len(yb)))
    return (time.perf_counter() - t0) * len(x) / n


def knn_options(args, precision: str):
    from disembed.retrieval import KnnOptions

    sizes = {k: v for k, v in (("block_rows", args.block_rows), ("block_cols", args.block_cols))
             if v}
    return KnnOptions(precision=precision, **sizes)


class _Collect(logging.Handler):
    """Keeps disembed's log lines of a phase (e.g. how many bfloat16 lists were certified)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


def phase(name: str, x, y, args, workdir: Path) -> dict:
    from disembed.hardware import configure_threads

    log = _Collect()
    logging.getLogger("disembed").addHandler(log)
    logging.getLogger("disembed").setLevel(logging.INFO)
    threads = configure_threads().threads
    out: dict = {"phase": name, "threads": threads, "uptime_before": uptime()}
    t0 = time.perf_counter()
    lists = None
    if name.startswith("matmul"):
        ours = knn_options(args, "float32")
        blocks = BIG_BLOCKS if name.endswith("-big") else (ours.block_rows, ours.block_cols)
        dtype = "bfloat16" if name.startswith("matmul-bf16") else "float32"
        seconds = floor(x, y, dtype, args.floor_fraction, blocks)
        out.update(floor_fraction=args.floor_fraction, blocks=blocks)
    elif name.startswith("exact"):
        from disembed.retrieval import knn_both

        precision = {"exact": "auto", "exact-fp32": "float32", "exact-bf16": "bfloat16"}[name]
        options = knn_options(args, precision)
        out["precision"] = options.resolved_precision()
        lists = knn_both(x, y, args.k, options)
    else:
        from disembed.retrieval import search_both

        lists = search_both(x, y, args.k, name)  # faiss-flat, -ivf, -hnsw
    seconds = seconds if name.startswith("matmul") else time.perf_counter() - t0
    if lists is not None:
        np.savez(workdir / f"{name}-{len(x)}.npz", *lists)
    out.update(seconds=round(seconds, 2), uptime_after=uptime(),
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               log=log.lines)
    return out


def recall_reference(x, y, k: int, sample: int, workdir: Path) -> dict:
    """Exact lists of ``sample`` rows of each side (brute force through our exact search)."""
    from disembed.retrieval import knn

    rng = np.random.default_rng(0)
    rows_x = np.sort(rng.choice(len(x), size=min(sample, len(x)), replace=False))
    rows_y = np.sort(rng.choice(len(y), size=min(sample, len(y)), replace=False))
    return {"rows_x": rows_x, "I_xy": knn(np.asarray(x[rows_x]), y, k)[1],
            "rows_y": rows_y, "I_yx": knn(np.asarray(y[rows_y]), x, k)[1]}


def recall(lists: dict, ref: dict) -> dict:
    def r(I, J):  # noqa: E741
        return float(np.mean([len(set(a) & set(b)) / J.shape[1]
                              for a, b in zip(I.tolist(), J.tolist(), strict=True)]))
    return {"x->y": r(lists["arr_1"][ref["rows_x"]], ref["I_xy"]),
            "y->x": r(lists["arr_3"][ref["rows_y"]], ref["I_yx"])}


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


def ratios(secs: dict) -> dict:
    floors = {p: s for p, s in secs.items() if p.startswith("matmul")}
    out: dict = {}
    if floors:
        best = min(floors, key=floors.get)
        out["floor"] = best
        for ours in ("exact", "exact-fp32", "exact-bf16"):
            if ours in secs:
                out[f"{ours}/floor"] = round(secs[ours] / floors[best], 3)
                fp32 = min((s for p, s in floors.items() if "bf16" not in p), default=None)
                if fp32:
                    out[f"{ours}/fp32-floor"] = round(secs[ours] / fp32, 3)
    for other in ("faiss-flat", "faiss-ivf", "faiss-hnsw"):
        if other in secs and "exact" in secs:
            out[f"{other}/exact"] = round(secs[other] / secs["exact"], 3)
    return out


def markdown(report: dict) -> str:
    probe = report["probe"]
    lines = [f"n = {report['n']:,} x {report['n']:,}, d = {report['dim']}, k = {report['k']}; "
             f"CPU {probe['cpu_model']}, flags {' '.join(probe['flags']) or '-'}, "
             f"fp32 {probe['fp32_gflops']} / bf16 {probe['bf16_gflops']} GFLOP/s (probe), "
             f"{report['phases'][0]['threads'] if report['phases'] else '?'} threads",
             "", "| phase | seconds | peak RSS MB | recall | load before -> after |",
             "|---|---:|---:|---:|---|"]
    for p in report["phases"]:
        rec = p.get("recall")
        rec = "" if rec is None else f"{min(rec.values()):.4f}"
        before = p["uptime_before"].split("load average:")[-1].strip()
        after = p["uptime_after"].split("load average:")[-1].strip()
        lines.append(f"| {p['phase']}{' (' + p['precision'] + ')' if 'precision' in p else ''}"
                     f" | {p['seconds']} | {p['peak_rss_mb']} | {rec} | {before} -> {after} |")
    lines += ["", "ratios: " + ", ".join(f"{k} {v}" for k, v in report["ratios"].items())]
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=tuple(PRESETS), default="quick")
    ap.add_argument("--n", type=int, default=None, help="rows per side (overrides the preset)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--phases", default=None, help="comma list (overrides the preset); "
                    "matmul-bf16 is added where the probe measures bfloat16 faster")
    ap.add_argument("--floor-fraction", type=float, default=None)
    ap.add_argument("--block-rows", type=int, default=None, help="ours and the floor's blocks")
    ap.add_argument("--block-cols", type=int, default=None)
    ap.add_argument("--recall-sample", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of every phase (default: disembed's choice, made once here)")
    ap.add_argument("--refresh-probe", action="store_true",
                    help="measure the hardware probe again (do this on a quiet machine)")
    ap.add_argument("--workdir", default="/tmp/bench_mining")
    ap.add_argument("--out", default=None)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)  # child mode
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    preset = PRESETS[args.preset]
    args.n = args.n or preset["n"]
    args.floor_fraction = args.floor_fraction or preset.get("floor_fraction", 1.0)
    args.recall_sample = args.recall_sample or preset.get("recall_sample", 2000)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    x, y = data(workdir, args.n, args.dim)
    if args.phase:
        print(json.dumps(phase(args.phase, x, y, args, workdir)))
        return
    from disembed.hardware import THREADS_ENV_VAR, configure_threads, probe

    threads = configure_threads(args.threads)
    os.environ[THREADS_ENV_VAR] = str(threads.threads)  # the same count in every phase
    os.environ["DISEMBED_PROGRESS"] = "0"
    caps = probe(refresh=args.refresh_probe)
    phases = with_bf16_phases((args.phases or preset["phases"]).split(","), caps.bf16_faster)
    report: dict = {"preset": args.preset, "n": args.n, "dim": args.dim, "k": args.k,
                    "probe": caps.to_dict(), "threads": threads.to_dict(),
                    "uptime_start": uptime(), "phases": []}
    for name in phases:
        cmd = [sys.executable, __file__, "--preset", args.preset, "--n", str(args.n), "--dim",
               str(args.dim), "--k", str(args.k), "--workdir", str(workdir),
               "--floor-fraction", str(args.floor_fraction), "--phase", name]
        cmd += [f"--block-{w}={v}" for w, v in (("rows", args.block_rows),
                                                 ("cols", args.block_cols)) if v]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode:
            raise SystemExit(f"phase {name} failed:\n{run.stderr[-3000:]}")
        result = json.loads(run.stdout.strip().splitlines()[-1])
        report["phases"].append(result)
        print(json.dumps(result), flush=True)
    finish(report, x, y, args, workdir)


def with_bf16_phases(phases: list[str], bf16_faster: bool) -> list[str]:
    """Where bfloat16 is native, the bf16 product floors and an fp32-only exact run too."""
    if bf16_faster and "matmul" in phases and "matmul-bf16" not in phases:
        phases.insert(phases.index("matmul") + 1, "matmul-bf16")
        if "matmul-big" in phases:
            phases.insert(phases.index("matmul-big") + 1, "matmul-bf16-big")
    if bf16_faster and "exact" in phases and "exact-fp32" not in phases:
        phases.insert(phases.index("exact") + 1, "exact-fp32")  # before / after bfloat16
    return phases


def finish(report: dict, x, y, args, workdir: Path) -> None:
    secs = {p["phase"]: p["seconds"] for p in report["phases"]}
    report["ratios"] = ratios(secs)
    exact, flat = workdir / f"exact-{args.n}.npz", workdir / f"faiss-flat-{args.n}.npz"
    if "exact" in secs and "faiss-flat" in secs:
        report["agreement_exact_vs_faiss_flat"] = agreement(exact, flat)
    approx = [p for p in report["phases"] if p["phase"] in ("faiss-ivf", "faiss-hnsw")]
    if approx:
        ref = recall_reference(x, y, args.k, args.recall_sample, workdir)
        for p in approx:
            p["recall"] = recall(dict(np.load(workdir / f"{p['phase']}-{args.n}.npz")), ref)
        report["recall_sample"] = args.recall_sample
    report["uptime_end"] = uptime()
    report["markdown"] = markdown(report)
    print(json.dumps(report, indent=1))
    print(report["markdown"])
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
