"""Mining at a million sentences a side: the approximate path in full, the exact path on a
sample, recall and mined-pair agreement between them.

    python benchmarks/mining_million_corpus.py ../shared/data runs/million
    python benchmarks/mining_million_embed.py runs/million --encoder use-m3 \
        --real 300000 --real-src 100000
    PYTHONPATH=src python benchmarks/bench_mining_million.py runs/million --index ivf \
        --recall 0.98 --queries 10000 --pair-queries 1000 --out runs/million/bench-ivf.json

Steps, each timed (``time.perf_counter``, load before and after) with the process' peak RSS:

1. load both sides (``(n, d)`` float32, unit rows);
2. for each direction train an IVF index on a sample of the searched side, fill it, and
   choose nprobe for the recall target on 1,000 sampled queries (what
   ``disembed mine --backend approx`` does);
3. ``--queries`` sampled sources searched approximately and exactly (the two rates give
   the projected time of the whole run on each path), recall@k of the approximate lists,
   and the candidate targets of those sources searched back in both ways, so that the
   forward pairs above ``--threshold`` of exact and approximate mining can be compared on
   the same sources;
4. ``--full``: every row searched both ways approximately, max-score candidates counted.

Without ``--full`` the whole-run times are projections from measured rates (the JSON
names them ``..._projected``): the exact 1M x 1M run is 10^12 products, hours on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import subprocess
import time
from pathlib import Path

import numpy as np

from disembed.retrieval.approximate import (
    ApproximateOptions,
    choose_nprobe,
    fill_index,
    index_bytes,
    recall_at_k,
    search_index,
    train_index,
)
from disembed.retrieval.knn import KnnOptions, knn, normalize_rows
from disembed.retrieval.margin import candidates, margin, neighbour_mean, select

logger = logging.getLogger("bench_mining_million")


def load_unit_rows(path: Path, rows: int | None, block: int = 65536) -> np.ndarray:
    """``(n, d)`` float32 with unit rows, normalised block by block (no float64 copy)."""
    M = np.load(path, mmap_mode="r")[:rows]  # noqa: N806
    out = np.empty(M.shape, dtype=np.float32)
    for r0 in range(0, len(M), block):
        out[r0 : r0 + block] = normalize_rows(np.asarray(M[r0 : r0 + block], dtype=np.float32))
    return out


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def cpu_flags() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()
    flags = next((ln.split(":", 1)[1].split() for ln in out.splitlines()
                  if ln.startswith("Flags")), [])
    return " ".join(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c")))


class Timer:
    def __init__(self):
        self.steps: dict[str, dict] = {}

    def __call__(self, name, fn):
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        out = fn()
        self.steps[name] = {"seconds": round(time.perf_counter() - t0, 2),
                            "peak_rss_gib": round(peak_rss_gib(), 2),
                            "load_before": round(load, 2), "load_after":
                            round(os.getloadavg()[0], 2)}
        logger.info("%s: %s", name, self.steps[name])
        return out


def build_side(q, db, k, opt, timer, name):
    """Train, fill and calibrate one direction's index (``q`` searched in ``db``)."""
    trained = timer(f"{name} train", lambda: train_index(db, opt))
    index = timer(f"{name} fill", lambda: fill_index(trained, db, opt.block))
    cal = timer(f"{name} calibrate", lambda: choose_nprobe(index, q, db, k, opt))
    info = {"nlist": index.nlist, "nprobe": cal.nprobe, "sample_recall": cal.recall,
            "curve": {str(p): r for p, r in cal.curve.items()},
            "index_bytes": index_bytes(index)}
    return index, cal.nprobe, info


def forward_best(D, I, mean_x, mean_y):  # noqa: E741, N803
    scores = margin(D, mean_x[:, None], mean_y[I])
    best = np.argmax(scores, axis=1)
    return scores[np.arange(len(D)), best], I[np.arange(len(D)), best]


def sampled(x, y, k, sides, opt, args, timer) -> dict:
    """Sampled sources searched both ways: rates (projected to the whole run), recall@k
    against exact, and the forward pairs above the threshold, exact vs approximate (each
    with its own neighbour means of the candidate targets)."""
    (idx_y, np_y, _), (idx_x, np_x, _) = sides
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(len(x), size=min(args.queries, len(x)), replace=False))
    exact_opt = KnnOptions(precision="float32")
    Da, Ia = timer("approx sample src->tgt",  # noqa: N806
                   lambda: search_index(idx_y, x[sample], y, k, np_y, opt))
    De, Ie = timer("exact sample src->tgt", lambda: knn(x[sample], y, k, exact_opt))  # noqa: N806
    recall = recall_at_k(Ia, Ie)
    pick = np.sort(rng.choice(len(sample), size=min(args.pair_queries, len(sample)),
                              replace=False))  # the sources whose pairs are compared
    De, Ie, Da, Ia, sample = De[pick], Ie[pick], Da[pick], Ia[pick], sample[pick]  # noqa: N806
    targets = np.unique(np.concatenate([Ie.ravel(), Ia.ravel()]))
    Dta, _ = timer("approx candidate targets tgt->src",  # noqa: N806
                   lambda: search_index(idx_x, y[targets], x, k, np_x, opt))
    Dte, _ = timer("exact candidate targets tgt->src",  # noqa: N806
                   lambda: knn(y[targets], x, k, exact_opt))
    mean_e, mean_a = np.full(len(y), np.nan), np.full(len(y), np.nan)
    mean_e[targets], mean_a[targets] = neighbour_mean(Dte), neighbour_mean(Dta)
    e_score, e_tgt = forward_best(De, Ie, neighbour_mean(De), mean_e)
    a_score, a_tgt = forward_best(Da, Ia, neighbour_mean(Da), mean_a)
    e_keep, a_keep = e_score >= args.threshold, a_score >= args.threshold
    e_pairs = {(int(i), int(j)) for i, j, kk in zip(sample, e_tgt, e_keep, strict=True) if kk}
    a_pairs = {(int(i), int(j)) for i, j, kk in zip(sample, a_tgt, a_keep, strict=True) if kk}
    st = timer.steps
    rate = {name: args.queries / st[f"{name} sample src->tgt"]["seconds"]
            for name in ("approx", "exact")}
    back_rate = len(targets) / st["approx candidate targets tgt->src"]["seconds"]
    build = sum(v["seconds"] for name, v in st.items()
                if name.endswith(("train", "fill", "calibrate")))
    return {"queries": args.queries, "pair_queries": len(sample), "recall_at_k": recall,
            "approx_queries_per_second": round(rate["approx"], 1),
            "approx_backward_queries_per_second": round(back_rate, 1),
            "exact_queries_per_second": round(rate["exact"], 1),
            "approx_full_run_seconds_projected": round(
                build + len(x) / rate["approx"] + len(y) / back_rate, 1),
            "approx_build_and_calibrate_seconds": round(build, 1),
            "exact_full_run_seconds_projected": round(len(x) / rate["exact"], 1),
            "exact_pairs_above_threshold": len(e_pairs),
            "approx_pairs_above_threshold": len(a_pairs),
            "pairs_in_both": len(e_pairs & a_pairs),
            "same_best_target": float(np.mean(e_tgt == a_tgt))}


def full_run(x, y, k, sides, opt, args, timer) -> dict:
    """Every source and target searched approximately; max-score pairs above the threshold."""
    (idx_y, np_y, _), (idx_x, np_x, _) = sides
    D_xy, I_xy = timer("approx all src->tgt", lambda: search_index(idx_y, x, y, k, np_y, opt))  # noqa: N806
    D_yx, I_yx = timer("approx all tgt->src", lambda: search_index(idx_x, y, x, k, np_x, opt))  # noqa: N806
    score, _, _ = timer("margin", lambda: candidates(D_xy, I_xy, D_yx, I_yx, "max-score"))
    return {"candidates": len(score),
            "kept": int(select(score, threshold=args.threshold).sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="with src.emb.npy and tgt.emb.npy")
    ap.add_argument("--index", choices=("ivf", "ivfpq"), default="ivf")
    ap.add_argument("--recall", type=float, default=0.98)
    ap.add_argument("--pq-bytes", type=int, default=None)
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--rows", type=int, default=None, help="use the first N rows of each side")
    ap.add_argument("--queries", type=int, default=10_000, help="sampled sources: recall, rates")
    ap.add_argument("--pair-queries", type=int, default=1_000,
                    help="of those, the sources whose mined pairs are compared (each needs its "
                         "k candidate targets searched back, exactly and approximately)")
    ap.add_argument("--full", action="store_true",
                    help="also search every row both ways (hours on 2 loaded cores)")
    ap.add_argument("--threshold", type=float, default=1.06, help="ratio margin kept")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    timer, k = Timer(), args.k
    x, y = timer("load", lambda: [load_unit_rows(args.folder / f"{s}.emb.npy", args.rows)
                                  for s in ("src", "tgt")])
    opt = ApproximateOptions(index=args.index, recall=args.recall, pq_bytes=args.pq_bytes)
    sides = [build_side(x, y, k, opt, timer, "src->tgt"), build_side(y, x, k, opt, timer,
                                                                      "tgt->src")]
    report = {
        "config": {**{k_: str(v) for k_, v in vars(args).items()}, "n_src": len(x),
                   "n_tgt": len(y), "dim": x.shape[1], "cpu_flags": cpu_flags(),
                   "cores": os.cpu_count()},
        "indexes": {"src->tgt": sides[0][2], "tgt->src": sides[1][2]},
        "sample": sampled(x, y, k, sides, opt, args, timer),
    }
    if args.full:
        report["full"] = full_run(x, y, k, sides, opt, args, timer)
    report["steps"] = timer.steps
    report["peak_rss_gib"] = round(peak_rss_gib(), 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, args.out)
    logger.info("%s", json.dumps(report["sample"]))


if __name__ == "__main__":
    main()
