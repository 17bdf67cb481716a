"""Mining on a cluster: shard, encode in parallel, k-NN per shard pair, merge on the driver.

Steps (each a task; the driver holds only k-NN lists and candidates):

1. Gather the inputs (several files, gzip: :mod:`.inputs`) and shard both collections into
   row ranges of ``shard_rows``.
2. ``encode_shard``: each task reads its rows (by byte offset), encodes them through the
   embedding cache (a rerun, or a task retried after its worker died, encodes nothing
   twice), optionally applies a saved disentangler's meaning view, L2-normalises and
   writes ``<run_dir>/<side>-<key>-<i>.npy`` atomically. The key hashes the input's bytes,
   the encoder, the view and the row range: a shard already there is reused (the run
   resumes by shard), a changed input gets new shards.
3. Search, by the backend :func:`~disembed.retrieval.search.resolve_backend` picks for
   ``n x m`` (``auto``: exact up to 200k x 200k, approximate above; on a cluster this is
   not measured per run as on one machine, :mod:`~disembed.retrieval.auto`):

   * exact: ``knn_pair`` for every (source shard, target shard) pair, both directions from
     one pass of products;
   * approximate: the driver trains one IVF quantiser per side on a sample of that side's
     shards; ``fill_shard_index`` tasks build one index per shard from it (written to the
     run folder); the driver chooses ``nprobe`` for the recall target on 1,000 sampled
     queries against all shards (:func:`~disembed.retrieval.approximate.choose_nprobe_sharded`);
     ``approx_pair`` tasks search every source shard in every target shard's index and back.

4. The driver merges the partial lists of each row (top-k of the union, indices shifted
   to global rows) and computes margins and candidates as the single-process path does:
   with the exact backend the mined pairs equal :func:`.mine.mine_files`'s.

Tasks run on an executor: :class:`RayExecutor` (``connect("local:4")``, ``"auto"``,
``"ray://host:10001"``) or :class:`InProcess` (the same steps in this process: tests,
and a machine without Ray). Ray re-runs a task whose worker died (``max_retries``); every
task writes its output atomically and is idempotent, so a retried task gives the same
bytes. One progress bar counts the tasks done over the whole job.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..encoders import load_encoder
from ..encoders.cached import cached
from ..exceptions import ConfigError, require
from ..progress import progress_bar
from ..retrieval.knn import canonical_lists, knn_both, normalize_rows
from ..retrieval.margin import candidates, select
from ..retrieval.search import resolve_backend
from ..saved_model import SavedModel
from ..util.files import atomic_write_bytes
from ..util.locks import folder_lock
from .collection import Collection, _parse
from .inputs import gather_inputs
from .mine import MineConfig, Mined, open_collection

logger = logging.getLogger(__name__)

_LOCAL = re.compile(r"^local(?::(\d+))?$")


class InProcess:
    """Runs every task at once in this process (same steps, no cluster)."""

    def submit(self, fn: Callable, *args) -> Any:
        return fn(*args)

    def gather(self, handles: list, on_done: Callable[[], None]) -> list:
        for _ in handles:
            on_done()
        return list(handles)


class RayExecutor:
    """Tasks on a Ray cluster; a task whose worker dies is run again (``max_retries``)."""

    def __init__(self, ray, max_retries: int = 3) -> None:
        self.ray, self.max_retries, self._remote = ray, max_retries, {}

    def submit(self, fn: Callable, *args) -> Any:
        if fn not in self._remote:
            self._remote[fn] = self.ray.remote(max_retries=self.max_retries)(fn)
        return self._remote[fn].remote(*args)

    def gather(self, handles: list, on_done: Callable[[], None]) -> list:
        pending = list(handles)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for _ in done:
                on_done()
        return self.ray.get(list(handles))


def connect(address: str) -> RayExecutor:
    """A :class:`RayExecutor` on ``address``: ``local`` (a local cluster with one worker slot
    per CPU), ``local:N`` (N worker slots), ``auto`` (the cluster this node belongs to),
    ``ray://host:port`` or ``host:port``."""
    ray = require("ray", "ray", "mining on a cluster (--cluster)")
    match = _LOCAL.match(address)
    if not (match or address == "auto" or address.startswith("ray://")
            or re.match(r"^[\w.-]+:\d+$", address)):
        raise ConfigError(f"cluster address {address!r} not understood; expected local, "
                          "local:N, auto, ray://host:port or host:port")
    if ray.is_initialized():
        logger.warning("Ray is already running in this process: its cluster is used, not "
                       "%s (call ray.shutdown() first to connect elsewhere)", address)
        return RayExecutor(ray)
    if match:
        cpus = int(match.group(1) or os.cpu_count() or 1)
        if cpus < 1:
            raise ConfigError(f"local:N needs N >= 1 worker slots, got {address!r}")
        ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    else:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    return RayExecutor(ray)


# --------------------------------------------------------------------------- tasks


def encode_shard(path: str, fmt: str, offsets: np.ndarray, encoder: dict, out: str,
                 model_dir: str | None = None, language: str | None = None,
                 batch_size: int = 64) -> str:
    """Encode the lines at ``offsets`` of ``path`` into ``out`` (``(rows, d) float32`` .npy);
    ``encoder``: ``{"spec", "options", "cache_dir", "cache_dtype"}``."""
    if Path(out).exists():
        return out
    with open(path, "rb") as f:
        texts = []
        for off in offsets.tolist():
            f.seek(off)
            texts.append(_parse(f.readline().rstrip(b"\n"), fmt, path)[1])
    enc = cached(load_encoder(encoder["spec"], **encoder.get("options", {})),
                 encoder.get("cache_dir"), encoder.get("cache_dtype", "float32"))
    X = enc.encode(texts, batch_size=batch_size)
    if model_dir:
        X = SavedModel.load(model_dir).disentangler.meaning(X, language)
    _save_npy(out, normalize_rows(X))
    return out


def knn_pair(x_path: str, y_path: str, k: int) -> tuple[np.ndarray, ...]:
    """Exact k-NN lists of one shard pair, both directions (local row indices)."""
    x, y = np.load(x_path, mmap_mode="r"), np.load(y_path, mmap_mode="r")
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, min(k, len(x), len(y)))
    return (*canonical_lists(x, y, D_xy, I_xy), *canonical_lists(y, x, D_yx, I_yx))


def fill_shard_index(trained_path: str, shard_path: str, out: str) -> str:
    """The trained empty index of ``trained_path`` filled with one shard, written to ``out``."""
    from ..retrieval.approximate import fill_index
    from ..retrieval.faiss_backend import _faiss

    if Path(out).exists():
        return out
    faiss = _faiss()
    index = fill_index(faiss.read_index(trained_path), np.load(shard_path, mmap_mode="r"))
    atomic_write_bytes(Path(out), [faiss.serialize_index(index).tobytes()])
    return out


def approx_pair(q_path: str, index_path: str, db_path: str, k: int, nprobe: int,
                options: dict) -> tuple[np.ndarray, np.ndarray]:
    """The approximate k-NN of one query shard in one database shard's index."""
    from ..retrieval.approximate import ApproximateOptions, search_index
    from ..retrieval.faiss_backend import _faiss

    index = _faiss().read_index(index_path)
    q, db = np.load(q_path, mmap_mode="r"), np.load(db_path, mmap_mode="r")
    D, I = search_index(index, q, db, min(k, len(db)), nprobe,  # noqa: E741
                        ApproximateOptions(**options))
    return canonical_lists(q, db, D, I)


# --------------------------------------------------------------------------- driver


def merge_lists(parts: list[tuple[np.ndarray, np.ndarray, int]], k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Merge partial lists ``(D (n, k_i), I (n, k_i), index offset)`` of the same rows."""
    D = np.concatenate([p[0] for p in parts], axis=1)
    I = np.concatenate([np.where(p[1] >= 0, p[1] + p[2], -1) for p in parts], axis=1)  # noqa: E741
    order = np.argsort(-D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)


def _shards(n: int, rows: int) -> list[tuple[int, int]]:
    return [(r, min(r + rows, n)) for r in range(0, n, rows)] or [(0, 0)]


def _save_npy(out: str | Path, X: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(X, dtype=np.float32))
    atomic_write_bytes(Path(out), [buf.getvalue()])


def _shard_key(col: Collection, encoder: dict, model_dir, language, shard_rows: int) -> str:
    h = hashlib.blake2b(digest_size=6)
    model = _model_digest(model_dir)
    h.update(json.dumps([col.fingerprint(), encoder["spec"], encoder.get("options", {}),
                         encoder.get("cache_dtype"), model, language, shard_rows],
                        sort_keys=True, default=str).encode())
    return h.hexdigest()


def _model_digest(model_dir) -> str | None:
    if not model_dir:
        return None
    h = hashlib.blake2b(digest_size=8)
    for p in sorted(Path(model_dir).rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


class _Job:
    """One cluster mining run: the executor, the progress bar and the run folder."""

    def __init__(self, executor, run_dir: Path, bar) -> None:
        self.executor, self.run_dir, self.bar = executor, run_dir, bar

    def run(self, fn: Callable, calls: Sequence[tuple]) -> list:
        self.bar.total = (self.bar.total or 0) + len(calls)
        self.bar.refresh()
        handles = [self.executor.submit(fn, *args) for args in calls]
        return self.executor.gather(handles, lambda: self.bar.update(1))


def mine_distributed(src, tgt, encoder_spec: str, *, run_dir: str | Path,
                     config: MineConfig | None = None, shard_rows: int = 100_000,
                     cache_dir: str | None = None, cache_dtype: str = "float32",
                     encoder_options: dict | None = None, model_dir: str | None = None,
                     src_lang: str | None = None, tgt_lang: str | None = None,
                     format: str = "auto", skip_bad: bool = False, batch_size: int = 64,
                     executor=None, address: str | None = None
                     ) -> tuple[Mined, Collection, Collection]:
    """Mine ``src`` x ``tgt`` (files, lists or globs, plain or gzip) with tasks on
    ``executor`` (default: :func:`connect` to ``address``, else ``local``). Returns the
    pairs and both collections (for :func:`~.mine.write_pairs`)."""
    if shard_rows < 1:
        raise ConfigError(f"shard_rows must be >= 1, got {shard_rows}")
    cfg = config or MineConfig()
    executor = executor or connect(address or "local")
    run_dir = Path(run_dir)
    encoder = {"spec": encoder_spec, "options": encoder_options or {}, "cache_dir": cache_dir,
               "cache_dtype": cache_dtype}
    t0 = time.perf_counter()
    with folder_lock(run_dir), progress_bar(0, "mine (cluster tasks)", unit="task") as bar:
        job = _Job(executor, run_dir, bar)
        cols, paths = [], []
        for side, spec, lang in (("src", src, src_lang), ("tgt", tgt, tgt_lang)):
            col = open_collection(*gather_inputs(spec, run_dir, side, format), skip_bad,
                                  "source" if side == "src" else "target")
            key = _shard_key(col, encoder, model_dir, lang, shard_rows)
            calls = [(str(col.path), col.format, col.offsets[a:b], encoder,
                      str(run_dir / f"{side}-{key}-{i:05d}.npy"), model_dir, lang, batch_size)
                     for i, (a, b) in enumerate(_shards(len(col), shard_rows))]
            cols.append(col)
            paths.append(job.run(encode_shard, calls))
        embed_s = time.perf_counter() - t0
        n, m = len(cols[0]), len(cols[1])
        k = min(cfg.k, n, m)
        backend = resolve_backend(cfg.backend, n, m)
        if backend == "auto":  # not measured per run on a cluster (single machine: .auto)
            logger.info("backend auto on a cluster: %d x %d is above the exact size, "
                        "searching approximately", n, m)
            backend = "approx"
        rows = (_shards(n, shard_rows), _shards(m, shard_rows))
        if backend in ("approx", "approx-pq"):
            lists = _approximate_lists(job, paths, rows, k, backend, cfg.backend_options)
        else:
            if backend not in ("exact", "exact-fp32", "exact-bf16"):
                logger.warning("backend %s on a cluster: searching each shard pair exactly",
                               backend)
            lists = _exact_lists(job, paths, rows, k)
    t1 = time.perf_counter()
    score, s, t = candidates(*lists, mode=cfg.mode, kind=cfg.margin)
    keep = select(score, threshold=cfg.threshold, top=cfg.top)
    mined = Mined(score[keep], s[keep], t[keep], {"embed": embed_s, "knn": t1 - t0 - embed_s,
                                                  "margin": time.perf_counter() - t1},
                  k=k, backend=backend)
    return mined, cols[0], cols[1]


def _exact_lists(job: _Job, paths, rows, k):
    x_paths, y_paths = paths
    calls = [(xp, yp, k) for xp in x_paths for yp in y_paths]
    results = job.run(knn_pair, calls)
    done = {(i, j): results[i * len(y_paths) + j]
            for i in range(len(x_paths)) for j in range(len(y_paths))}
    fwd = [merge_lists([(done[i, j][0], done[i, j][1], rows[1][j][0])
                        for j in range(len(y_paths))], k) for i in range(len(x_paths))]
    bwd = [merge_lists([(done[i, j][2], done[i, j][3], rows[0][i][0])
                        for i in range(len(x_paths))], k) for j in range(len(y_paths))]
    return (np.concatenate([f[0] for f in fwd]), np.concatenate([f[1] for f in fwd]),
            np.concatenate([b[0] for b in bwd]), np.concatenate([b[1] for b in bwd]))


def _approximate_lists(job: _Job, paths, rows, k, backend, backend_options):
    from ..retrieval.approximate import APPROXIMATE_INDEXES, ApproximateOptions
    from ..retrieval.search import APPROXIMATE

    opt = ApproximateOptions(index=APPROXIMATE[backend], **backend_options)
    assert opt.index in APPROXIMATE_INDEXES
    indexes = [_side_indexes(job, side_paths, side_rows, opt, name)
               for side_paths, side_rows, name in zip(paths, rows, ("src", "tgt"), strict=True)]
    out = []
    for q, db in ((0, 1), (1, 0)):  # forward: sources in target indexes; backward: reverse
        nprobe = _calibrate(paths[q], indexes[db], paths[db], rows[db], k, opt)
        calls = [(qp, ip, dp, k, nprobe, asdict(opt)) for qp in paths[q]
                 for ip, dp in zip(indexes[db], paths[db], strict=True)]
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


def _side_indexes(job: _Job, shard_paths, shard_rows, opt, name) -> list[str]:
    """One index file per shard of a side, all from one quantiser trained on the driver."""
    from ..retrieval.approximate import train_index
    from ..retrieval.faiss_backend import _faiss

    faiss = _faiss()
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
    from ..retrieval.approximate import choose_nprobe_sharded
    from ..retrieval.faiss_backend import _faiss

    if opt.nprobe is not None:
        return opt.nprobe
    faiss = _faiss()
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
