"""The exact path at a million sentences a side, in full: every source against every
target and back in one pass of products, as ``disembed mine --backend exact`` runs it.

    python benchmarks/mining_million_corpus.py ../shared/data runs/million
    python benchmarks/mining_million_embed.py runs/million --encoder use-m3 \
        --real 300000 --real-src 100000
    PYTHONPATH=src python benchmarks/bench_mining_million_exact.py runs/million \
        --out runs/million/bench-exact.json

The k-NN search uses the library's default precision (``auto``: bfloat16 products with
certified float32 re-scoring where the hardware probe measures bfloat16 faster, float32
elsewhere; the JSON names the one used). Each direction is timed (wall, peak RSS, load
before and after); the max-score candidates and the pairs above ``--threshold`` are
counted. The lists are saved (``exact-knn.npz``, atomically) so that approximate lists of
the same rows can be scored against them (``--approx-lists``: recall@k over every row).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
from bench_mining_million import Timer, cpu_flags, load_unit_rows, peak_rss_gib

from disembed.retrieval.approximate import recall_at_k
from disembed.retrieval.knn import KnnOptions, knn_both
from disembed.retrieval.margin import candidates, select

logger = logging.getLogger("bench_mining_million_exact")


def save_lists(path: Path, **arrays) -> None:
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="with src.emb.npy and tgt.emb.npy")
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--rows", type=int, default=None, help="use the first N rows of each side")
    ap.add_argument("--precision", default="auto", choices=("auto", "float32", "bfloat16"))
    ap.add_argument("--threshold", type=float, default=1.06, help="ratio margin kept")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    timer, k = Timer(), args.k
    x, y = timer("load", lambda: [load_unit_rows(args.folder / f"{s}.emb.npy", args.rows)
                                  for s in ("src", "tgt")])
    opt = KnnOptions(precision=args.precision)
    resolved = opt.resolved_precision()
    logger.info("precision: %s (asked %s)", resolved, args.precision)
    t0 = time.perf_counter()
    # one pass of products serves both directions, as in `disembed mine --backend exact`
    D_xy, I_xy, D_yx, I_yx = timer("exact all both ways",  # noqa: N806
                                   lambda: knn_both(x, y, k, opt))
    search_s = time.perf_counter() - t0
    score, _, _ = timer("margin", lambda: candidates(D_xy, I_xy, D_yx, I_yx, "max-score"))
    lists = args.folder / ("exact-knn.npz" if args.rows is None else f"exact-knn-{args.rows}.npz")
    save_lists(lists, D_xy=D_xy, I_xy=I_xy, D_yx=D_yx, I_yx=I_yx)
    report = {
        "config": {**{k_: str(v) for k_, v in vars(args).items()}, "n_src": len(x),
                   "n_tgt": len(y), "dim": x.shape[1], "cpu_flags": cpu_flags(),
                   "cores": os.cpu_count(), "precision_used": resolved},
        "search_seconds_both_ways": round(search_s, 1),
        "pairs_per_second": round(len(x) * len(y) / search_s),
        "candidates": len(score),
        "kept": int(select(score, threshold=args.threshold).sum()),
        "lists": str(lists),
        "steps": timer.steps,
        "peak_rss_gib": round(peak_rss_gib(), 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, args.out)
    logger.info("%s", json.dumps({k_: v for k_, v in report.items() if k_ != "steps"}))


def recall_of(lists: Path, approx: Path) -> dict:
    """recall@k of saved approximate lists (``I_xy``, ``I_yx``) against the exact ones."""
    e, a = np.load(lists), np.load(approx)
    return {d: recall_at_k(a[f"I_{d}"], e[f"I_{d}"]) for d in ("xy", "yx")}


if __name__ == "__main__":
    main()
