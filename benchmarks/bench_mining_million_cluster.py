"""The exact path at a million sentences a side on a local Ray cluster, in full, and the
mined pairs compared with the single-process run's.

    python benchmarks/mining_million_corpus.py ../shared/data runs/million
    python benchmarks/mining_million_embed.py runs/million --encoder use-m3 \
        --real 300000 --real-src 100000
    python benchmarks/bench_mining_million_exact.py runs/million --out runs/million/bench-exact.json
    python benchmarks/measure_run.py --out runs/million/cluster-measure.json -- \
        python benchmarks/bench_mining_million_cluster.py runs/million --cluster local:2 \
        --out runs/million/bench-cluster.json

``disembed.mining.distributed.mine_embeddings_distributed`` cuts both sides' embeddings
(``src.emb.npy``, ``tgt.emb.npy``) into shards of ``--shard-rows`` in ``--run-dir`` and
searches every shard pair exactly as a Ray task (one worker slot per CPU of ``local:N``);
the driver merges the lists and computes the max-score candidates. ``measure_run.py``
around it records the peak memory of the driver, the raylet and every worker. With the
single-process lists of ``bench_mining_million_exact.py`` in the folder (``exact-knn.npz``),
the candidates of both runs are compared: the same pairs, the same scores. The cluster's
pairs are saved beside ``--out`` (``<out>-pairs.npz``). ``--tie-report`` counts what
can make two exact runs differ (rows identical to another row, lists with equal
similarities) and the candidates touching it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
from bench_mining_million import cpu_flags, load_unit_rows

from disembed.mining.distributed import connect, mine_embeddings_distributed
from disembed.mining.mine import MineConfig
from disembed.retrieval.knn import canonical_lists
from disembed.retrieval.margin import candidates, select

logger = logging.getLogger("bench_mining_million_cluster")


def load_sides(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' embeddings, float32 unit rows, as the single-process run read them."""
    return tuple(load_unit_rows(folder / f"{s}.emb.npy", None) for s in ("src", "tgt"))


def single_process_candidates(x: np.ndarray, y: np.ndarray, lists: Path
                              ) -> tuple[np.ndarray, ...]:
    """Max-score candidates from the single-process lists, with the similarities
    recomputed pair by pair as every mining path does before the margins."""
    e = np.load(lists)
    fwd = canonical_lists(x, y, e["D_xy"], e["I_xy"])
    bwd = canonical_lists(y, x, e["D_yx"], e["I_yx"])
    return candidates(*fwd, *bwd, mode="max-score")


def compare(mined, single: tuple[np.ndarray, ...], threshold: float) -> dict:
    score, src, tgt = single
    same_pairs = (len(score) == len(mined) and np.array_equal(src, mined.src)
                  and np.array_equal(tgt, mined.tgt))
    cluster = set(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True))
    one = set(zip(src.tolist(), tgt.tolist(), strict=True))
    keep_c = {p for p, s in zip(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True),
                                mined.score.tolist(), strict=True) if s >= threshold}
    keep_1 = {p for p, s in zip(zip(src.tolist(), tgt.tolist(), strict=True), score.tolist(),
                                strict=True) if s >= threshold}
    return {"candidates_single": len(score), "candidates_cluster": len(mined),
            "same_pairs_in_the_same_order": bool(same_pairs),
            "same_scores": bool(same_pairs and np.array_equal(score, mined.score)),
            "max_score_difference": float(np.max(np.abs(score - mined.score)))
            if same_pairs else None,
            "pairs_only_single": len(one - cluster), "pairs_only_cluster": len(cluster - one),
            "kept_single": len(keep_1), "kept_cluster": len(keep_c),
            "kept_in_both": len(keep_1 & keep_c)}


def duplicated(M: np.ndarray) -> np.ndarray:
    """``(n,) bool``: rows identical, bit for bit, to another row of ``M``."""
    rows = np.ascontiguousarray(M).view(np.dtype((np.void, M.shape[1] * M.itemsize))).ravel()
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    return counts[inverse] > 1


def tie_report(folder: Path, lists: Path, threshold: float) -> dict:
    """Where two runs of an exact search may choose differently: rows identical to another
    row, k-NN lists holding equal similarities, and the candidates touching either."""
    x, y = load_sides(folder)
    e = np.load(lists)
    dup_x, dup_y = duplicated(x), duplicated(y)
    tie_x = (np.diff(e["D_xy"], axis=1) == 0).any(axis=1)
    tie_y = (np.diff(e["D_yx"], axis=1) == 0).any(axis=1)
    score, src, tgt = single_process_candidates(x, y, lists)
    touched = dup_x[src] | dup_y[tgt] | tie_x[src] | tie_y[tgt]
    return {"duplicated_source_rows": int(dup_x.sum()), "duplicated_target_rows":
            int(dup_y.sum()), "source_lists_with_ties": int(tie_x.sum()),
            "target_lists_with_ties": int(tie_y.sum()), "candidates": len(score),
            "candidates_touching_them": int(touched.sum()),
            "above_threshold_touching_them": int((touched & (score >= threshold)).sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="with src.emb.npy and tgt.emb.npy")
    ap.add_argument("--cluster", default="local:2", help="Ray address (local:N, auto, ...)")
    ap.add_argument("--shard-rows", type=int, default=100_000)
    ap.add_argument("--run-dir", type=Path, default=None, help="default FOLDER/cluster-run")
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--threshold", type=float, default=1.06, help="ratio margin kept")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tie-report", action="store_true", help="only count duplicated rows, "
                    "tied lists and the candidates touching them (no mining), print JSON")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.tie_report:
        print(json.dumps(tie_report(args.folder, args.folder / "exact-knn.npz", args.threshold)))
        return
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    executor = connect(args.cluster)
    started = time.perf_counter() - t0
    mined = mine_embeddings_distributed(
        args.folder / "src.emb.npy", args.folder / "tgt.emb.npy",
        run_dir=args.run_dir or args.folder / "cluster-run",
        config=MineConfig(k=args.k, backend="exact", mode="max-score"),
        shard_rows=args.shard_rows, executor=executor)
    wall = time.perf_counter() - t0
    report = {
        "config": {**{k_: str(v) for k_, v in vars(args).items()}, "cpu_flags": cpu_flags(),
                   "cores": os.cpu_count()},
        "wall_seconds": round(wall, 1), "ray_start_seconds": round(started, 1),
        "seconds": {k_: round(v, 1) for k_, v in mined.seconds.items()},
        "candidates": len(mined),
        "kept": int(select(mined.score, threshold=args.threshold).sum()),
        "load_before": load_before, "load_after": os.getloadavg(),
    }
    pairs = args.out.with_name(args.out.stem + "-pairs.npz")
    tmp_pairs = pairs.with_name(pairs.stem + ".tmp.npz")
    np.savez(tmp_pairs, score=mined.score, src=mined.src, tgt=mined.tgt)
    os.replace(tmp_pairs, pairs)  # kept, so that pairs differing from another run can be traced
    report["pairs"] = str(pairs)
    lists = args.folder / "exact-knn.npz"
    if lists.exists():
        t1 = time.perf_counter()
        report["against_single_process"] = compare(
            mined, single_process_candidates(*load_sides(args.folder), lists),
            args.threshold)
        report["compare_seconds"] = round(time.perf_counter() - t1, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, args.out)
    logger.info("%s", json.dumps(report))


if __name__ == "__main__":
    main()
