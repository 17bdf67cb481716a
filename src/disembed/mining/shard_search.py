"""The search phase of cluster mining: k-NN between two sides cut into shard files.

Both sides are lists of ``(rows, d) float32`` unit-row ``.npy`` shards (written by the
encode tasks of :mod:`.distributed`, or cut from precomputed embeddings). The search runs
as tasks on an executor and the driver merges the partial lists:

* exact: :func:`knn_pair` for every (source shard, target shard) pair, both directions
  from one pass of products;
* approximate: the driver trains one IVF quantiser per side on a sample of that side's
  shards; :func:`fill_shard_index` tasks build one index per shard from it (written to the
  run folder); the driver chooses ``nprobe`` for the recall target on 1,000 sampled
  queries against all shards (:func:`~disembed.retrieval.approximate.choose_nprobe_sharded`);
  :func:`approx_pair` tasks search every source shard in every target shard's index and back.

:func:`merge_lists` gives each row the top-k of the union of its partial lists (indices
shifted to global rows); the lists are then what the single-process search returns.

Every shard pair's partial lists are kept in the run folder (``knn-*.npz``, ``ann-*.npz``,
written atomically, named by the shard files and the search's settings): a run stopped in
the search phase, the driver included, resumes at the pairs not yet searched; an unreadable
file is searched again. They take ``(rows of both shards) x k x 12`` bytes a pair: 0.96 GB
for the 100 pairs of 1M x 1M in shards of 100,000, k = 4.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..progress import progress_bar
from ..retrieval.approximate import (
    APPROXIMATE_INDEXES,
    ApproximateOptions,
    choose_nprobe_sharded,
    fill_index,
    search_index,
    train_index,
)
from ..retrieval.faiss_backend import faiss_module
from ..retrieval.knn import canonical_lists, knn_both
from ..retrieval.search import APPROXIMATE, resolve_backend
from ..util.files import atomic_write_bytes

logger = logging.getLogger(__name__)

EXACT_ON_CLUSTER = ("exact", "exact-fp32", "exact-bf16")


# --------------------------------------------------------------------------- tasks


def knn_pair(x_path: str, y_path: str, k: int, out: str | None = None
             ) -> tuple[np.ndarray, ...]:
    """Exact k-NN lists of one shard pair, both directions (local row indices); kept in
    ``out`` (``.npz``, atomic), which a rerun reads instead of searching again."""
    x, y = np.load(x_path, mmap_mode="r"), np.load(y_path, mmap_mode="r")
    done = load_lists(out, (len(x), len(x), len(y), len(y)))
    if done is not None:
        return done
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, min(k, len(x), len(y)))
    return save_lists(out, (*canonical_lists(x, y, D_xy, I_xy),
                            *canonical_lists(y, x, D_yx, I_yx)))


def fill_shard_index(trained_path: str, shard_path: str, out: str) -> str:
    """The trained empty index of ``trained_path`` filled with one shard, written to ``out``."""

    if Path(out).exists():
        return out
    faiss = faiss_module()
    index = fill_index(faiss.read_index(trained_path), np.load(shard_path, mmap_mode="r"))
    atomic_write_bytes(Path(out), [faiss.serialize_index(index).tobytes()])
    return out


def approx_pair(q_path: str, index_path: str, db_path: str, k: int, nprobe: int,
                options: dict, out: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The approximate k-NN of one query shard in one database shard's index; kept in
    ``out`` like :func:`knn_pair`'s lists."""

    q, db = np.load(q_path, mmap_mode="r"), np.load(db_path, mmap_mode="r")
    done = load_lists(out, (len(q), len(q)))
    if done is not None:
        return done
    index = faiss_module().read_index(index_path)
    D, I = search_index(index, q, db, min(k, len(db)), nprobe,  # noqa: E741
                        ApproximateOptions(**options))
    return save_lists(out, canonical_lists(q, db, D, I))


def load_lists(path: str | None, rows: tuple[int, ...]) -> tuple[np.ndarray, ...] | None:
    """The arrays a task kept in ``path``, one per entry of ``rows`` with that many rows, or
    None (no file yet, or one that cannot be read whole or does not fit its shards: that
    pair is searched again and the file written anew)."""
    if path is None or not Path(path).exists():
        return None
    try:
        with np.load(path) as f:
            arrays = tuple(f[f"a{i}"] for i in range(len(rows)))
    except Exception as exc:  # noqa: BLE001  (any unreadable file is searched again)
        logger.warning("partial lists %s cannot be read (%s: %s); searching that pair again",
                       path, type(exc).__name__, exc)
        return None
    shapes = [a.shape for a in arrays]
    if (any(len(s) != 2 for s in shapes) or [s[0] for s in shapes] != list(rows)
            or shapes[0::2] != shapes[1::2]):
        logger.warning("partial lists %s have shapes %s, expected %s rows; searching that "
                       "pair again", path, shapes, list(rows))
        return None
    return arrays


def save_lists(path: str | None, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """``arrays`` written to ``path`` (``.npz``, atomically) when a path is given; returned."""
    if path is not None:
        buf = io.BytesIO()
        np.savez(buf, **{f"a{i}": a for i, a in enumerate(arrays)})
        atomic_write_bytes(Path(path), [buf.getvalue()])
    return arrays


# --------------------------------------------------------------------------- helpers


def merge_lists(parts: list[tuple[np.ndarray, np.ndarray, int]], k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Merge partial lists ``(D (n, k_i), I (n, k_i), index offset)`` of the same rows."""
    D = np.concatenate([p[0] for p in parts], axis=1)
    I = np.concatenate([np.where(p[1] >= 0, p[1] + p[2], -1) for p in parts], axis=1)  # noqa: E741
    order = np.argsort(-D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)


def shard_ranges(n: int, rows: int) -> list[tuple[int, int]]:
    """Row ranges ``[a, b)`` of ``rows`` each covering ``0..n`` (one empty range for n = 0)."""
    return [(r, min(r + rows, n)) for r in range(0, n, rows)] or [(0, 0)]


def save_npy(out: str | Path, X: np.ndarray) -> None:
    """``X`` as a float32 ``.npy`` at ``out``, written atomically."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(X, dtype=np.float32))
    atomic_write_bytes(Path(out), [buf.getvalue()])


class ShardJob:
    """One cluster run: the executor, the run folder and one progress bar over every task."""

    def __init__(self, executor, run_dir: Path, bar) -> None:
        self.executor, self.run_dir, self.bar = executor, run_dir, bar

    def run(self, fn: Callable, calls: Sequence[tuple]) -> list:
        self.bar.total = (self.bar.total or 0) + len(calls)
        self.bar.refresh()
        handles = [self.executor.submit(fn, *args) for args in calls]
        return self.executor.gather(handles, lambda: self.bar.update(1))


def job_bar():
    """The one progress bar of a cluster run (tasks: shards made, shard pairs searched)."""
    return progress_bar(0, "mine (cluster tasks)", unit="task")


# --------------------------------------------------------------------------- search


def search_shards(job: ShardJob, paths: tuple[list[str], list[str]], n: int, m: int,
                  shard_rows: int, k: int, backend: str, backend_options: dict[str, Any]
                  ) -> tuple[tuple[np.ndarray, ...], str]:
    """k-NN lists ``(D_xy, I_xy, D_yx, I_yx)`` of ``n`` sources in ``m`` targets, both cut
    into shards of ``shard_rows``, and the backend that searched."""
    backend = resolve_backend(backend, n, m)
    if backend == "auto":  # not measured per run on a cluster (single machine: .auto)
        logger.info("backend auto on a cluster: %d x %d is above the exact size, "
                    "searching approximately", n, m)
        backend = "approx"
    rows = (shard_ranges(n, shard_rows), shard_ranges(m, shard_rows))
    if backend in ("approx", "approx-pq"):
        return _approximate_lists(job, paths, rows, k, backend, backend_options), backend
    if backend not in EXACT_ON_CLUSTER:
        logger.warning("backend %s on a cluster: searching each shard pair exactly", backend)
    return _exact_lists(job, paths, rows, k), backend


def _pair_files(job: ShardJob, kind: str, key: list) -> Callable[[int, int], str]:
    """Where each shard pair ``(i, j)`` keeps its partial lists: named by what they were
    searched from (shard files, whose names carry their content's key, k, the settings)."""
    tag = hashlib.blake2b(json.dumps(key, default=str).encode(), digest_size=6).hexdigest()
    return lambda i, j: str(job.run_dir / f"{kind}-{tag}-{i:05d}-{j:05d}.npz")


def _exact_lists(job: ShardJob, paths, rows, k):
    x_paths, y_paths = paths
    pair_file = _pair_files(job, "knn", [x_paths, y_paths, k])
    calls = [(xp, yp, k, pair_file(i, j))
             for i, xp in enumerate(x_paths) for j, yp in enumerate(y_paths)]
    results = job.run(knn_pair, calls)
    done = {(i, j): results[i * len(y_paths) + j]
            for i in range(len(x_paths)) for j in range(len(y_paths))}
    fwd = [merge_lists([(done[i, j][0], done[i, j][1], rows[1][j][0])
                        for j in range(len(y_paths))], k) for i in range(len(x_paths))]
    bwd = [merge_lists([(done[i, j][2], done[i, j][3], rows[0][i][0])
                        for i in range(len(x_paths))], k) for j in range(len(y_paths))]
    return (np.concatenate([f[0] for f in fwd]), np.concatenate([f[1] for f in fwd]),
            np.concatenate([b[0] for b in bwd]), np.concatenate([b[1] for b in bwd]))


def _approximate_lists(job: ShardJob, paths, rows, k, backend, backend_options):

    opt = ApproximateOptions(index=APPROXIMATE[backend], **backend_options)
    assert opt.index in APPROXIMATE_INDEXES
    indexes = [_side_indexes(job, side_paths, side_rows, opt, name)
               for side_paths, side_rows, name in zip(paths, rows, ("src", "tgt"), strict=True)]
    out = []
    for q, db in ((0, 1), (1, 0)):  # forward: sources in target indexes; backward: reverse
        nprobe = _calibrate(paths[q], indexes[db], paths[db], rows[db], k, opt)
        pair_file = _pair_files(job, "ann", [paths[q], indexes[db], paths[db], k, nprobe,
                                             asdict(opt)])
        calls = [(qp, ip, dp, k, nprobe, asdict(opt), pair_file(i, j))
                 for i, qp in enumerate(paths[q])
                 for j, (ip, dp) in enumerate(zip(indexes[db], paths[db], strict=True))]
        results = job.run(approx_pair, calls)
        n_db = len(paths[db])
        merged = [merge_lists([(*results[i * n_db + j], rows[db][j][0]) for j in range(n_db)], k)
                  for i in range(len(paths[q]))]
        out += [np.concatenate([m[0] for m in merged]), np.concatenate([m[1] for m in merged])]
    return tuple(out)


def _sample_shards(shard_paths, shard_rows, size: int, seed: int) -> np.ndarray:
    """``size`` rows drawn (seeded) across the shard files of one side."""
    n = shard_rows[-1][1]
    rng = np.random.default_rng(seed)
    picks = np.sort(rng.choice(n, size=min(n, size), replace=False))
    parts = []
    for path, (a, b) in zip(shard_paths, shard_rows, strict=True):
        local = picks[(picks >= a) & (picks < b)] - a
        if len(local):
            parts.append(np.asarray(np.load(path, mmap_mode="r")[local], dtype=np.float32))
    return np.concatenate(parts)


def _side_indexes(job: ShardJob, shard_paths, shard_rows, opt, name) -> list[str]:
    """One index file per shard of a side, all from one quantiser trained on the driver."""

    faiss = faiss_module()
    tag = hashlib.blake2b(json.dumps([shard_paths, asdict(opt)], default=str).encode(),
                          digest_size=6).hexdigest()
    trained_path = job.run_dir / f"{name}-{tag}.trained.faiss"
    if not trained_path.exists():
        n, d = shard_rows[-1][1], np.load(shard_paths[0], mmap_mode="r").shape[1]
        sample = _sample_shards(shard_paths, shard_rows,
                                opt.train_per_cell * opt.cells(n), opt.seed)
        trained = train_index(sample, opt.__class__(**{**asdict(opt), "nlist": opt.cells(n)}))
        assert trained.d == d
        atomic_write_bytes(trained_path, [faiss.serialize_index(trained).tobytes()])
    calls = [(str(trained_path), p, str(Path(p).with_suffix(f".{tag}.faiss")))
             for p in shard_paths]
    return job.run(fill_shard_index, calls)


def _calibrate(query_paths, index_paths, db_paths, db_rows, k, opt) -> int:
    """``nprobe`` for the recall target, measured on sampled queries against every shard."""

    if opt.nprobe is not None:
        return opt.nprobe
    faiss = faiss_module()
    q_rows = [(0, 0)] * len(query_paths)
    start = 0
    for i, p in enumerate(query_paths):
        rows = len(np.load(p, mmap_mode="r"))
        q_rows[i] = (start, start + rows)
        start += rows
    queries = _sample_shards(query_paths, q_rows, opt.sample, opt.seed + 1)
    shards = [(faiss.read_index(ip, faiss.IO_FLAG_MMAP), np.load(dp, mmap_mode="r"), a)
              for ip, dp, (a, _) in zip(index_paths, db_paths, db_rows, strict=True)]
    return choose_nprobe_sharded(shards, queries, k, opt).nprobe
