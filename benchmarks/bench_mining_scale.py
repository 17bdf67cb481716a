"""Scaling of k-NN for mining: exact (ours) vs faiss IVF / HNSW, time, memory and recall@k.

    PYTHONPATH=src nice -n 5 python benchmarks/bench_mining_scale.py --sizes 10000,100000 \
        --queries 5000 --data random --out runs/bench_mining_scale.json

For each index size n: ``queries`` query rows are searched against n rows (k=4) with
our exact backend (the reference), faiss IVF (nlist = 4 sqrt(n), several nprobe) and
HNSW (M=32, several efSearch). Reported: build and search seconds, recall@k against
the exact lists, and the projected time for full margin mining of n x n (both
directions): exact = search time x n / queries (one pass of products serves both
directions, so this is the same as searching n queries one way), approximate =
2 x (build + search time x n / queries). Projections assume search time linear in
the number of queries, which holds for all three backends.

``--data random`` uses seeded random unit vectors (the worst case for approximate
indexes: no cluster structure); ``--data FILE.npy`` any (N, d) matrix, e.g. real
embeddings (rows are shuffled with a fixed seed; queries are rows not in the index).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np

from disembed.mining import knn, normalize_rows
from disembed.retrieval.faiss_backend import FaissOptions, build_index, search_index


def matrices(data: str, n: int, nq: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    if data == "random":
        rng = np.random.default_rng(n)
        return (normalize_rows(rng.standard_normal((n, dim), dtype=np.float32)),
                normalize_rows(rng.standard_normal((nq, dim), dtype=np.float32)))
    M = np.load(data, mmap_mode="r")
    order = np.random.default_rng(0).permutation(len(M))
    if n + nq > len(M):
        raise SystemExit(f"{data} has {len(M)} rows; need {n} + {nq}")
    return normalize_rows(M[np.sort(order[:n])]), normalize_rows(M[np.sort(order[n : n + nq])])


def recall(I: np.ndarray, ref: np.ndarray) -> float:  # noqa: E741
    k = ref.shape[1]
    pairs = zip(I.tolist(), ref.tolist(), strict=True)
    return float(np.mean([len(set(a) & set(b)) / k for a, b in pairs]))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_size(n: int, nq: int, args) -> list[dict]:
    db, q = matrices(args.data, n, nq, args.dim)
    rows = []
    (D, ref), secs = timed(lambda: knn(q, db, args.k))
    scale = n / nq
    rows.append({"n": n, "backend": "exact", "build_s": 0.0, "search_s": round(secs, 2),
                 "recall": 1.0, "projected_mining_s": round(secs * scale, 1)})
    configs = [("ivf", {"nprobe": p}) for p in args.nprobe] + \
              [("hnsw", {"ef_search": e}) for e in args.ef_search]
    built = {}
    for kind, knobs in configs:
        if kind not in built:
            built[kind] = timed(lambda kind=kind: build_index(db, FaissOptions(index=kind)))
        index, build_s = built[kind]
        if kind == "ivf":
            index.nprobe = knobs["nprobe"]
        else:
            index.hnsw.efSearch = knobs["ef_search"]
        (_, I), secs = timed(lambda index=index: search_index(index, q, args.k))  # noqa: E741
        rows.append({"n": n, "backend": f"faiss-{kind}", **knobs, "build_s": round(build_s, 2),
                     "search_s": round(secs, 2), "recall": round(recall(I, ref), 4),
                     "projected_mining_s": round(2 * (build_s + secs * scale), 1)})
    for r in rows:
        r["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        print(json.dumps(r), flush=True)  # noqa: T201
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--data", default="random")
    ap.add_argument("--nprobe", default="8,32,128")
    ap.add_argument("--ef-search", default="64,256")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.nprobe = [int(v) for v in args.nprobe.split(",")]
    args.ef_search = [int(v) for v in args.ef_search.split(",")]
    report = {"args": vars(args), "load_before": os.getloadavg(), "rows": []}
    for n in (int(s) for s in args.sizes.split(",")):
        report["rows"] += run_size(n, args.queries, args)
    report["load_after"] = os.getloadavg()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
