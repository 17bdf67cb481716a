"""Mining at a million sentences a side: the approximate path in full, the exact path on a
sample, recall and mined-pair agreement between them.

    python benchmarks/mining_million_corpus.py ../shared/data runs/million
    disembed encode runs/million/src.txt --out runs/million/src.emb.npy --encoder use-m3
    disembed encode runs/million/tgt.txt --out runs/million/tgt.emb.npy --encoder use-m3
    PYTHONPATH=src python benchmarks/bench_mining_million.py runs/million --index ivf \
        --recall 0.95 --queries 10000 --out runs/million/bench-ivf.json

Steps, each timed (``time.perf_counter``) with the process' peak RSS after it:

1. load both sides (``(n, d)`` float32, unit rows);
2. approximate: for each direction train an IVF index on a sample, fill it, choose nprobe
   on 1,000 sampled queries for the recall target, search every query (what
   ``disembed mine --backend approx`` does), then margins and candidates (max-score) for
   the whole run, and the pairs above ``--threshold``;
3. exact on ``--queries`` sampled sources: their exact k-NN in all targets (timed: the
   exact path's rate, from which its full time is projected), recall@k of the approximate
   lists against it, and, for forward candidates, the exact neighbour means of each
   sampled source's candidate targets (their exact k-NN among all sources) so that exact
   and approximate margin scores of the same sources can be compared: agreement of the
   pairs above the threshold among the sampled sources.

The whole 1M x 1M exact run is 10^12 products (hours on 2 cores); it is projected from the
sample's measured rate, not run (the JSON says which figures are projected).
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


def approximate_direction(q, db, k, opt, timer, name):
    trained = timer(f"{name} train", lambda: train_index(db, opt))
    index = timer(f"{name} fill", lambda: fill_index(trained, db, opt.block))
    cal = timer(f"{name} calibrate", lambda: choose_nprobe(index, q, db, k, opt))
    D, I = timer(f"{name} search", lambda: search_index(index, q, db, k, cal.nprobe, opt))  # noqa: E741
    info = {"nlist": index.nlist, "nprobe": cal.nprobe, "sample_recall": cal.recall,
            "curve": {str(p): r for p, r in cal.curve.items()},
            "index_bytes": index_bytes(index)}
    return D, I, info


def compare_on_sample(x, y, D_xy, I_xy, D_yx, k, args, timer) -> dict:  # noqa: E741, N803
    """Exact lists of sampled sources: recall, projected exact time, pair agreement."""
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(len(x), size=min(args.queries, len(x)), replace=False))
    exact_opt = KnnOptions(precision="float32")
    De, Ie = timer("exact sample src->tgt", lambda: knn(x[sample], y, k, exact_opt))
    recall = recall_at_k(I_xy[sample], Ie)
    targets = np.unique(np.concatenate([Ie.ravel(), I_xy[sample].ravel()]))
    Dt, _ = timer("exact candidate targets tgt->src", lambda: knn(y[targets], x, k, exact_opt))
    exact_mean_y = np.full(len(y), np.nan)
    exact_mean_y[targets] = neighbour_mean(Dt)

    def forward_best(D, I, mean_x, mean_y):  # noqa: E741
        scores = margin(D, mean_x[:, None], mean_y[I])
        best = np.argmax(scores, axis=1)
        return scores[np.arange(len(D)), best], I[np.arange(len(D)), best]

    e_score, e_tgt = forward_best(De, Ie, neighbour_mean(De), exact_mean_y)
    a_score, a_tgt = forward_best(D_xy[sample], I_xy[sample], neighbour_mean(D_xy[sample]),
                                  neighbour_mean(D_yx))
    exact_rate = len(sample) / timer.steps["exact sample src->tgt"]["seconds"]
    e_keep, a_keep = e_score >= args.threshold, a_score >= args.threshold
    e_pairs = {(int(i), int(j)) for i, j, kk in zip(sample, e_tgt, e_keep, strict=True) if kk}
    a_pairs = {(int(i), int(j)) for i, j, kk in zip(sample, a_tgt, a_keep, strict=True) if kk}
    exact_rate = len(sample) / timer.steps["exact sample src->tgt"]["seconds"]
    return {"queries": len(sample), "recall_at_k": recall,
            "exact_queries_per_second": round(exact_rate, 1),
            "exact_full_run_seconds_projected": round(len(x) / exact_rate, 1),
            "exact_pairs_above_threshold": len(e_pairs),
            "approx_pairs_above_threshold": len(a_pairs),
            "pairs_in_both": len(e_pairs & a_pairs),
            "same_best_target": float(np.mean(e_tgt == a_tgt)),
            "max_abs_score_difference_same_target": float(np.max(np.abs(
                e_score - a_score)[e_tgt == a_tgt]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="with src.emb.npy and tgt.emb.npy")
    ap.add_argument("--index", choices=("ivf", "ivfpq"), default="ivf")
    ap.add_argument("--recall", type=float, default=0.95)
    ap.add_argument("--pq-bytes", type=int, default=None)
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--rows", type=int, default=None, help="use the first N rows of each side")
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--threshold", type=float, default=1.06, help="ratio margin kept")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    timer, k = Timer(), args.k
    x, y = timer("load", lambda: [normalize_rows(np.load(args.folder / f"{s}.emb.npy",
                                                         mmap_mode="r")[: args.rows])
                                  for s in ("src", "tgt")])
    opt = ApproximateOptions(index=args.index, recall=args.recall, pq_bytes=args.pq_bytes)
    D_xy, I_xy, fwd = approximate_direction(x, y, k, opt, timer, "src->tgt")
    D_yx, I_yx, bwd = approximate_direction(y, x, k, opt, timer, "tgt->src")
    score, s, t = timer("margin", lambda: candidates(D_xy, I_xy, D_yx, I_yx, "max-score"))
    kept = select(score, threshold=args.threshold)
    approx_s = sum(v["seconds"] for name, v in timer.steps.items()
                   if name.startswith(("src->tgt", "tgt->src")) or name == "margin")
    sample_report = compare_on_sample(x, y, D_xy, I_xy, D_yx, k, args, timer)
    report = {
        "config": {**{k_: str(v) for k_, v in vars(args).items()}, "n_src": len(x),
                   "n_tgt": len(y), "dim": x.shape[1], "cpu_flags": cpu_flags(),
                   "cores": os.cpu_count()},
        "steps": timer.steps,
        "approximate": {"src->tgt": fwd, "tgt->src": bwd, "seconds": round(approx_s, 1),
                        "candidates": len(score), "kept": int(kept.sum())},
        "sample": sample_report,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, args.out)
    logger.info("%s", json.dumps(report["sample"]))
    logger.info("approximate %.1fs, exact projected %.0fs", approx_s,
                report["sample"]["exact_full_run_seconds_projected"])


if __name__ == "__main__":
    main()
