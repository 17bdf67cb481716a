"""Exact mining k-NN against its product floors, interleaved in one process, with where
the time goes (issue 36).

    # the figures of record, each alone on a quiet machine:
    PYTHONPATH=src python benchmarks/bench_mining_floor.py --n 40000 --repeats 3 \
        --out runs/floor-40k.json
    PYTHONPATH=src python benchmarks/bench_mining_floor.py --n 100000 --repeats 2 \
        --out runs/floor-100k.json
    # real embeddings (e.g. the BUCC de-en pools, any (n, d) .npy files):
    PYTHONPATH=src python benchmarks/bench_mining_floor.py --x de.npy --y en.npy --repeats 2
    # the code before issue 36 (61e23ce), timed stage by stage the same way:
    mkdir -p /tmp/before && git archive 61e23ce src | tar -x -C /tmp/before
    PYTHONPATH=src python benchmarks/bench_mining_floor.py --n 40000 --repeats 3 \
        --before-src /tmp/before/src --out runs/floor-40k-before.json
    # all of issue 36's figures of record in one command: benchmarks/floor_of_record.sh

Both directions (``knn_both``), k=4, seeded random unit vectors (``--dim``, 384 by default;
``bench_mining.data``, memory-mapped). Each repeat runs every phase once, in turn, so that
a change in the machine's load touches all of them alike; each phase's figure is its best
repeat, and the ratios are between best figures of the same run:

* ``floor-bf16`` / ``floor-fp32``: every product ``x @ y.T`` of the search's blocks into a
  reused buffer, nothing else: the floor of any exact method that computes each product
  once. Measured two ways, the faster counts: torch's own threads on each block
  (``intra-op``), and one worker per thread each multiplying its row blocks on one
  thread, as the search does (``workers``).
* ``exact``: ``precision="auto"`` (bfloat16 products and a float32 certificate where the
  hardware probe measures bfloat16 faster, float32 elsewhere); ``exact-fp32`` and
  ``exact-bf16`` force one. Each with its stages (``retrieval.profile``: products,
  selection, certification, copies, fallback; seconds summed over the workers) and the
  certificate's log line.
* ``faiss-flat``: two faiss ``IndexFlatIP`` searches (``search_both(..., "faiss-flat")``),
  in the first ``--faiss-repeats`` repeats only (1 by default: a reference, not a ratio
  target, and the slowest phase).
* ``before``: ``exact`` of the code at ``--before-src``, in a child process, its stages
  timed by wrapping that code's functions (``torch.mm``, ``update_both``, ``rescore`` and
  ``certified``, ``_block`` and ``RoundingStats.of``, the float32 search again).

Reported (wall seconds, and CPU seconds of the process: the work done, which a busy
machine disturbs less than the wall clock): CPU flags (``lscpu``), the hardware probe,
threads, the load average before and after every phase, each phase's seconds per repeat,
the ratios (exact / bf16 floor, exact / fp32 floor, exact-fp32 / fp32 floor), the stage
shares, and whether ``exact`` returned
the same top-k index sets as ``exact-fp32`` and as faiss flat (rows that differ, and
which of the two matches the float64 answer there). ``render_floor.py`` turns one or
more of these JSON files into the tables of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from bench_mining import data, uptime

from disembed.hardware import THREADS_ENV_VAR, configure_threads, probe
from disembed.retrieval import KnnOptions, knn_both

PHASES = ("floor-bf16", "floor-fp32", "exact", "exact-fp32", "faiss-flat")


def load() -> str:
    return uptime().split("load average:")[-1].strip()


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "?"
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.startswith("Model name")), "?")


def commit() -> str:
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=Path(__file__).parent)
    return run.stdout.strip() or "?"


def cpu_flags() -> str:
    """``lscpu | grep -o -E 'avx512_bf16|amx_bf16|avx2'`` and the other flags that matter."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "?"
    found = set(re.findall(r"\b(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_tile)\b", out))
    return " ".join(sorted(found)) or "-"


def floor(x, y, dtype: torch.dtype, blocks: tuple[int, int], threads: int) -> dict:
    """Seconds of every block product, both ways (torch's threads; one worker per thread)."""
    from disembed.retrieval.scan import run_parallel  # not in the code timed as "before"

    rows, cols = blocks
    yt = torch.from_numpy(np.array(y, dtype=np.float32)).to(dtype)
    starts = range(0, len(x), rows)

    def row_block(r0: int) -> None:
        out = torch.empty(rows * cols, dtype=dtype)
        xb = torch.from_numpy(np.array(x[r0 : r0 + rows], dtype=np.float32)).to(dtype)
        for c0 in range(0, len(yt), cols):
            yb = yt[c0 : c0 + cols]
            torch.mm(xb, yb.T, out=out[: len(xb) * len(yb)].view(len(xb), len(yb)))

    t0, c0 = time.perf_counter(), time.process_time()
    for r0 in starts:
        row_block(r0)
    intra, intra_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    run_parallel(row_block, starts, threads)
    workers, workers_cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": min(intra, workers), "intra-op": round(intra, 3),
            "workers": round(workers, 3), "cpu_seconds": round(min(intra_cpu, workers_cpu), 3)}


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "certified" in record.getMessage():
            self.lines.append(record.getMessage())


def exact(x, y, args, precision: str) -> tuple[dict, list[np.ndarray]]:
    from disembed.retrieval.profile import knn_profile  # not in the code timed as "before"

    log = _Lines()
    logging.getLogger("disembed").addHandler(log)
    options = KnnOptions(precision=precision, **block_options(args))
    with knn_profile() as prof:
        t0, c0 = time.perf_counter(), time.process_time()
        lists = knn_both(x, y, args.k, options)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    logging.getLogger("disembed").removeHandler(log)
    return ({"seconds": seconds, "cpu_seconds": round(cpu, 3),
             "precision": options.resolved_precision(),
             "stages": prof.to_dict()["seconds"], "certificate": log.lines}, lists)


def faiss_flat(x, y, k: int) -> tuple[dict, list[np.ndarray]]:
    """Two faiss ``IndexFlatIP`` searches (the lists re-scored canonically, as mining does)."""
    from disembed.retrieval import search_both

    t0, c0 = time.perf_counter(), time.process_time()
    lists = list(search_both(x, y, k, "faiss-flat"))
    return ({"seconds": time.perf_counter() - t0,
             "cpu_seconds": round(time.process_time() - c0, 3)}, lists)


def block_options(args) -> dict:
    return {k: v for k, v in (("block_rows", args.block_rows), ("block_cols", args.block_cols))
            if v}


def before(args) -> dict:
    """``exact`` of the code at ``--before-src``, in a child process."""
    env = {**os.environ, "PYTHONPATH": f"{args.before_src}{os.pathsep}"
           f"{Path(__file__).parent}"}
    cmd = [sys.executable, __file__, "--child-before", "--n", str(args.n), "--dim",
           str(args.dim), "--k", str(args.k), "--workdir", args.workdir]
    cmd += [f"--{side}={path}" for side, path in (("x", args.x), ("y", args.y)) if path]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if run.returncode:
        raise SystemExit(f"the before run failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def child_before(args) -> None:
    """Time the old search's stages by wrapping its functions (module docstring)."""
    import importlib

    knn_module = importlib.import_module("disembed.retrieval.knn")
    stages = dict.fromkeys(("copies", "products", "selection", "certification", "fallback"),
                           0.0)
    depth = {"fallback": 0}

    def timed(name, fn):
        def wrapper(*a, **kw):
            if depth["fallback"] and name != "fallback":
                return fn(*a, **kw)
            t0 = time.perf_counter()
            depth["fallback"] += name == "fallback"
            try:
                return fn(*a, **kw)
            finally:
                depth["fallback"] -= name == "fallback"
                stages[name] += time.perf_counter() - t0
        return wrapper

    torch.mm = timed("products", torch.mm)
    knn_module.update_both = timed("selection", knn_module.update_both)
    knn_module._block = timed("copies", knn_module._block)
    knn_module.RoundingStats.of = timed("copies", knn_module.RoundingStats.of)
    knn_module.rescore = timed("certification", knn_module.rescore)
    knn_module.certified = timed("certification", knn_module.certified)
    knn_module.knn = timed("fallback", knn_module.knn)
    x, y = sides(args, Path(args.workdir))
    configure_threads()
    log = _Lines()
    logging.getLogger("disembed").addHandler(log)
    logging.getLogger("disembed").setLevel(logging.INFO)
    t0, c0 = time.perf_counter(), time.process_time()
    knn_module.knn_both(x, y, args.k)
    print(json.dumps({"seconds": time.perf_counter() - t0,
                      "cpu_seconds": round(time.process_time() - c0, 3), "stages": stages,
                      "certificate": log.lines}))


def agreement(a: list[np.ndarray], b: list[np.ndarray], x, y, k: int) -> dict:
    """Rows whose top-k index sets differ between ``a`` and ``b``, and which of the two
    match the float64 answer (``float64_knn``) there."""
    from disembed.retrieval.knn import float64_knn

    out = {}
    for name, (d, i), (q, db) in (("x->y", (0, 1), (x, y)), ("y->x", (2, 3), (y, x))):
        differ = np.flatnonzero(~(np.sort(a[i], 1) == np.sort(b[i], 1)).all(1))
        ref = float64_knn(np.asarray(q[differ]), db, k)[1] if len(differ) else a[i][:0]
        out[name] = {"rows": len(a[i]), "rows_differing": len(differ),
                     "max_abs_similarity_diff": float(np.abs(a[d] - b[d]).max()),
                     "first_matches_float64": int((a[i][differ] == ref).all(1).sum()),
                     "second_matches_float64": int((b[i][differ] == ref).all(1).sum())}
    return out


def run_phases(x, y, args, threads: int, report: dict) -> None:
    default = KnnOptions()
    blocks = (args.block_rows or default.block_rows, args.block_cols or default.block_cols)
    lists = {}
    for rep in range(args.repeats):
        for name in args.phases:
            before_load = load()
            if name.startswith("floor"):
                dtype = torch.bfloat16 if name == "floor-bf16" else torch.float32
                result = floor(x, y, dtype, blocks, threads)
            elif name == "before":
                result = before(args)
            elif name == "faiss-flat":
                if rep >= args.faiss_repeats:
                    continue
                result, lists[name] = faiss_flat(x, y, args.k)
            else:
                precision = {"exact": "auto", "exact-fp32": "float32",
                             "exact-bf16": "bfloat16"}[name]
                result, lists[name] = exact(x, y, args, precision)
            result.update(repeat=rep, load_before=before_load, load_after=load())
            report["runs"].append({"phase": name, **result})
            print(json.dumps(report["runs"][-1]), flush=True)
    if "exact" in lists and "exact-fp32" in lists:
        report["agreement_exact_vs_exact_fp32"] = agreement(lists["exact"], lists["exact-fp32"],
                                                            x, y, args.k)
    if "exact" in lists and "faiss-flat" in lists:
        report["agreement_exact_vs_faiss_flat"] = agreement(lists["exact"], lists["faiss-flat"],
                                                            x, y, args.k)


def summary(report: dict) -> dict:
    best: dict = {}
    for run in report["runs"]:
        if run["phase"] not in best or run["seconds"] < best[run["phase"]]["seconds"]:
            best[run["phase"]] = run
    secs = {p: r["seconds"] for p, r in best.items()}
    cpu = {p: min(r["cpu_seconds"] for r in report["runs"] if r["phase"] == p) for p in secs}
    ratios, cpu_ratios = {}, {}
    for ours, ref in (("exact", "floor-bf16"), ("exact", "floor-fp32"), ("before", "floor-bf16"),
                      ("before", "floor-fp32"), ("exact-fp32", "floor-fp32"),
                      ("exact-bf16", "floor-bf16"), ("faiss-flat", "exact"),
                      ("before", "exact")):
        if ours in secs and ref in secs:
            ratios[f"{ours}/{ref}"] = round(secs[ours] / secs[ref], 3)
            cpu_ratios[f"{ours}/{ref}"] = round(cpu[ours] / cpu[ref], 3)
    shares = {}
    for p, r in best.items():
        if "stages" in r:
            total = sum(r["stages"].values())
            shares[p] = {s: round(v / total, 3) for s, v in r["stages"].items() if total}
    return {"best_seconds": {p: round(s, 3) for p, s in secs.items()}, "ratios": ratios,
            "best_cpu_seconds": cpu, "cpu_ratios": cpu_ratios,
            "stage_shares": shares,
            "all_seconds": {p: [round(r["seconds"], 3) for r in report["runs"]
                                if r["phase"] == p] for p in secs}}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40_000, help="rows per side")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--x", default=None, help="an (n, d) .npy of real embeddings instead of "
                    "random rows (rows normalised); --y the other side")
    ap.add_argument("--y", default=None)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--phases", default=",".join(PHASES),
                    help=f"comma list of {PHASES + ('exact-bf16', 'before')}")
    ap.add_argument("--faiss-repeats", type=int, default=1,
                    help="repeats that run faiss-flat (the first ones)")
    ap.add_argument("--before-src", default=None,
                    help="src/ of the code to time as 'before' (adds the phase)")
    ap.add_argument("--block-rows", type=int, default=None)
    ap.add_argument("--block-cols", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of every phase (default: disembed's choice, made once)")
    ap.add_argument("--workdir", default="/tmp/bench_mining")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child-before", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.phases = args.phases.split(",")
    if args.before_src and "before" not in args.phases:
        args.phases.append("before")
    return args


def sides(args, workdir: Path) -> tuple[np.ndarray, np.ndarray]:
    if not args.x:
        return data(workdir, args.n, args.dim)
    from disembed.retrieval import normalize_rows

    return tuple(normalize_rows(np.load(p)) for p in (args.x, args.y))


def main() -> None:
    args = parse_args()
    os.environ["DISEMBED_PROGRESS"] = "0"
    if args.child_before:
        child_before(args)
        return
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    x, y = sides(args, workdir)
    threads = configure_threads(args.threads)
    os.environ[THREADS_ENV_VAR] = str(threads.threads)  # the before run's child too
    logging.getLogger("disembed").setLevel(logging.INFO)
    caps = probe()
    report: dict = {"rows": [len(x), len(y)], "dim": x.shape[1], "data": args.x or "random",
                    "k": args.k, "repeats": args.repeats,
                    "cpu_flags": cpu_flags(), "cpu_model": cpu_model(),
                    "commit": commit(), "command": " ".join(sys.argv), "probe": caps.to_dict(),
                    "threads": threads.to_dict(), "blocks": block_options(args),
                    "load_start": load(), "runs": []}
    run_phases(x, y, args, threads.threads, report)
    report["load_end"] = load()
    report["summary"] = summary(report)
    print(json.dumps(report["summary"], indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
