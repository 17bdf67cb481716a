"""Approximate k-NN for mining at scale: a faiss IVF index whose ``nprobe`` is chosen by a
measured recall target, with exact re-scoring of what it finds.

How it works:

1. **Train** a coarse quantiser (k-means, ``nlist`` cells; default ``4 sqrt(n)``) on a seeded
   sample of the database, and for ``ivfpq`` a product quantiser of ``pq_bytes`` bytes a
   vector. The trained, empty index can be copied to several shards (:func:`train_index`,
   :func:`fill_index`): every shard then shares the same cells, so one ``nprobe`` means
   the same on all of them.
2. **Calibrate** (:func:`choose_nprobe`): ``sample`` queries are drawn (seeded) from the
   query side, their exact k-NN computed by brute force, and ``nprobe`` doubled from 1,
   then bisected to 1/16 of the last step, to the smallest value whose recall@k on that
   sample reaches the target (``recall=0.98``: BUCC F1 within 0.13 of exact,
   docs/mining.md). The measured curve is returned and logged; nothing is set by hand.
3. **Search** every query; ``ivfpq`` asks for ``rerank * k`` candidates and re-scores them
   exactly in float32 from the stored vectors, so the similarities of the neighbours found
   are exact (``ivf`` stores full vectors, its similarities are exact already). Margin
   scores are then computed from exact similarities of approximately found neighbours.

For mining both directions two indexes are built (one per side), each serving the
candidates and the margin neighbourhoods of its direction. faiss is optional
(``pip install "disembed[faiss]"``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from ..exceptions import ConfigError
from .faiss_backend import _faiss
from .knn import KnnOptions, knn

logger = logging.getLogger(__name__)

ApproximateIndex = Literal["ivf", "ivfpq"]
APPROXIMATE_INDEXES = ("ivf", "ivfpq")


@dataclass
class ApproximateOptions:
    """The approximate index and its recall target.

    Args:
        index: ``ivf`` (inverted lists of full float32 vectors: exact similarities, 4 d bytes
            a vector) or ``ivfpq`` (product-quantised codes, ``pq_bytes`` a vector, candidates
            re-scored exactly from the stored vectors).
        recall: target recall@k of the neighbour lists against exact search, measured on
            ``sample`` queries; chooses ``nprobe``. Ignored when ``nprobe`` is given.
        nprobe: cells visited per query (``None``: chosen by ``recall``).
        nlist: cells; default ``4 sqrt(n)`` (at least 39 training vectors a cell).
        pq_bytes: bytes per vector of ``ivfpq`` (must divide the dimension; default a quarter
            of it: 4-dimensional sub-vectors, 8 bits each).
        rerank: ``ivfpq`` re-scores ``rerank * k`` candidates per query.
        sample: queries used to measure recall (and to train: ``train_per_cell`` a cell).
        train_per_cell: training vectors per cell (faiss warns below 39).
        block: query rows per search call.
        seed: sampling and k-means seed.
    """

    index: ApproximateIndex = "ivf"
    recall: float = 0.98
    nprobe: int | None = None
    nlist: int | None = None
    pq_bytes: int | None = None
    rerank: int = 16
    sample: int = 1000
    train_per_cell: int = 64
    block: int = 65536
    seed: int = 0

    def __post_init__(self) -> None:
        if self.index not in APPROXIMATE_INDEXES:
            raise ConfigError(f"approximate index must be one of {APPROXIMATE_INDEXES}, got "
                              f"{self.index!r}")
        if not 0.0 < self.recall <= 1.0:
            raise ConfigError(f"recall must be in (0, 1] (e.g. 0.95), got {self.recall}")
        for name in ("nprobe", "nlist"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1 (or None to choose it), got {value}")
        if self.pq_bytes is not None and self.pq_bytes < 1:
            raise ConfigError(f"pq_bytes must be >= 1 (or None for a quarter of the "
                              f"dimension), got {self.pq_bytes}")
        if min(self.rerank, self.sample, self.train_per_cell, self.block) < 1:
            raise ConfigError("rerank, sample, train_per_cell and block must be >= 1")

    def cells(self, n: int) -> int:
        return self.nlist or max(1, min(n // 39, int(4 * np.sqrt(n))))


@dataclass
class Calibration:
    """What :func:`choose_nprobe` measured: ``curve`` maps nprobe -> recall@k."""

    nprobe: int
    recall: float
    target: float
    curve: dict[int, float] = field(default_factory=dict)
    queries: int = 0
    #: seconds to search the sampled queries exactly (the library's exact path, as ``exact``
    #: runs it here) and through the index at the chosen ``nprobe``: the two measured rates
    #: that ``auto`` compares (:mod:`.auto`)
    exact_seconds: float = float("nan")
    approx_seconds: float = float("nan")


def _sample_rows(n: int, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(n, size), replace=False))


def train_index(database: np.ndarray, options: ApproximateOptions | None = None):
    """An empty faiss index trained on a seeded sample of ``database (n, d)``."""
    faiss, opt = _faiss(), options or ApproximateOptions()
    n, d = database.shape
    nlist = opt.cells(n)
    quantizer = faiss.IndexFlatIP(d)
    if opt.index == "ivfpq":
        pq_bytes = opt.pq_bytes or max(1, d // 4)
        if d % pq_bytes:
            raise ConfigError(f"pq_bytes={pq_bytes} must divide the dimension {d} "
                              f"(e.g. {d // 8} or {d // 4})")
        index = faiss.IndexIVFPQ(quantizer, d, nlist, pq_bytes, 8, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = opt.seed
    rows = _sample_rows(n, max(opt.train_per_cell * nlist, 256 * 4), opt.seed)
    t0 = time.perf_counter()
    index.train(np.ascontiguousarray(database[rows], dtype=np.float32))
    logger.info("trained %s index: %d cells on %d vectors in %.1fs", opt.index, nlist,
                len(rows), time.perf_counter() - t0)
    return index


def fill_index(trained, database: np.ndarray, block: int = 65536):
    """A copy of the ``trained`` empty index holding ``database`` (added block by block)."""
    faiss = _faiss()
    index = faiss.clone_index(trained)
    for start in range(0, len(database), block):
        index.add(np.ascontiguousarray(database[start : start + block], dtype=np.float32))
    return index


def index_bytes(index) -> int:
    """Serialised size of a faiss index (what it takes on disk, about what it takes in RAM)."""
    return int(_faiss().serialize_index(index).size)


def search_index(index, queries: np.ndarray, database: np.ndarray, k: int, nprobe: int,
                 options: ApproximateOptions) -> tuple[np.ndarray, np.ndarray]:
    """``D (nq, k)`` exact similarities and ``I (nq, k)`` rows of the neighbours ``index``
    finds at ``nprobe`` (``-1`` / ``-inf`` where it finds fewer than ``k``)."""
    index.nprobe = nprobe
    wide = min(index.ntotal, k * options.rerank) if options.index == "ivfpq" else k
    D = np.empty((len(queries), k), dtype=np.float32)
    I = np.empty((len(queries), k), dtype=np.int64)  # noqa: E741
    for r0 in range(0, len(queries), options.block):
        q = np.ascontiguousarray(queries[r0 : r0 + options.block], dtype=np.float32)
        d_blk, i_blk = index.search(q, wide)
        if options.index == "ivfpq":
            d_blk, i_blk = _rescore_found(q, database, i_blk, k)
        D[r0 : r0 + len(q)], I[r0 : r0 + len(q)] = d_blk[:, :k], i_blk[:, :k]
    short = np.flatnonzero((I < 0).any(axis=1))
    if len(short) and nprobe < index.nlist:  # cells too small: these rows visit every cell
        logger.info("%d queries found fewer than k=%d neighbours in %d cells: searched again "
                    "in all %d", len(short), k, nprobe, index.nlist)
        D[short], I[short] = search_index(index, queries[short], database, k, index.nlist,
                                          options)
        index.nprobe = nprobe
    return D, I


def _rescore_found(q: np.ndarray, database: np.ndarray, found: np.ndarray, k: int,
                   block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Exact float32 top-``k`` among the ``found`` candidates (``-1`` = none) of each row."""
    D = np.full((len(q), k), -np.inf, dtype=np.float32)
    I = np.full((len(q), k), -1, dtype=np.int64)  # noqa: E741
    for r0 in range(0, len(q), block):
        cand = found[r0 : r0 + block]
        uniq, inverse = np.unique(np.where(cand < 0, 0, cand), return_inverse=True)
        vecs = torch.from_numpy(np.ascontiguousarray(database[uniq], dtype=np.float32))
        gathered = vecs[torch.from_numpy(inverse.reshape(cand.shape))]  # (b, c, d)
        qb = torch.from_numpy(np.ascontiguousarray(q[r0 : r0 + block]))
        sims = torch.bmm(gathered, qb[:, :, None]).squeeze(2).numpy()
        sims[cand < 0] = -np.inf
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        D[r0 : r0 + len(cand)] = np.take_along_axis(sims, order, 1)
        I[r0 : r0 + len(cand)] = np.take_along_axis(cand, order, 1)
    return D, I


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean fraction of each row's exact k neighbours that ``found`` contains."""
    k = exact.shape[1]
    hits = (found[:, :, None] == exact[:, None, :]).any(axis=1).sum(axis=1)
    return float(np.mean(hits / k))


def choose_nprobe(index, queries: np.ndarray, database: np.ndarray, k: int,
                  options: ApproximateOptions) -> Calibration:
    """The smallest ``nprobe`` whose recall@k on a seeded sample of ``queries`` reaches
    ``options.recall`` (doubled from 1, then bisected to 1/16 of the last step; all cells
    if none does), with the measured curve."""
    return choose_nprobe_sharded([(index, database, 0)], queries, k, options)


def search_shards(shards: list[tuple], queries: np.ndarray, k: int, nprobe: int,
                  options: ApproximateOptions) -> tuple[np.ndarray, np.ndarray]:
    """Search every ``(index, database rows, first global row)`` shard, merge to global top-k."""
    parts = []
    for index, rows, offset in shards:
        D, I = search_index(index, queries, rows, min(k, index.ntotal), nprobe, options)  # noqa: E741
        parts.append((D, np.where(I >= 0, I + offset, -1)))
    D = np.concatenate([p[0] for p in parts], axis=1)
    I = np.concatenate([p[1] for p in parts], axis=1)  # noqa: E741
    order = np.argsort(-D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)


def choose_nprobe_sharded(shards: list[tuple], queries: np.ndarray, k: int,
                          options: ApproximateOptions) -> Calibration:
    """:func:`choose_nprobe` over target shards ``(index, rows, first global row)`` that
    share one trained quantiser (:func:`train_index` once, :func:`fill_index` per shard):
    the exact reference is the merged exact k-NN over all shards."""
    if options.nprobe is not None:
        return Calibration(options.nprobe, float("nan"), options.recall)
    rows = _sample_rows(len(queries), options.sample, options.seed + 1)
    sample = np.ascontiguousarray(queries[rows], dtype=np.float32)
    # the library's exact path (bfloat16 products where measured faster, certified equal to
    # float32 brute force): the reference lists, and the exact rate that ``auto`` weighs
    exact_opt = KnnOptions()
    exact_parts = []
    t0 = time.perf_counter()
    for _, db, offset in shards:
        D, I = knn(sample, db, min(k, len(db)), exact_opt)  # noqa: E741
        exact_parts.append((D, I + offset))
    exact_seconds = time.perf_counter() - t0
    D = np.concatenate([p[0] for p in exact_parts], axis=1)
    order = np.argsort(-D, axis=1, kind="stable")[:, :k]
    exact = np.take_along_axis(np.concatenate([p[1] for p in exact_parts], axis=1), order, 1)
    nlist = shards[0][0].nlist
    curve: dict[int, float] = {}
    seconds: dict[int, float] = {}

    def measure(p: int) -> float:
        t = time.perf_counter()
        _, found = search_shards(shards, sample, k, p, options)
        seconds[p] = time.perf_counter() - t
        curve[p] = recall_at_k(found, exact)
        return curve[p]

    nprobe = 1
    while measure(nprobe) < options.recall and nprobe < nlist:
        nprobe = min(2 * nprobe, nlist)
    if curve[nprobe] >= options.recall and nprobe > 1:  # bisect down to 1/16 of the step
        lo, hi = nprobe // 2, nprobe
        while hi - lo > max(1, hi // 16):
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if measure(mid) >= options.recall else (mid, hi)
        nprobe = hi
    curve = dict(sorted(curve.items()))
    cal = Calibration(nprobe, curve[nprobe], options.recall, curve, len(rows),
                      exact_seconds=exact_seconds, approx_seconds=seconds[nprobe])
    logger.info("nprobe=%d of %d cells: recall@%d %.4f on %d sampled queries (target %.3f; "
                "curve %s); the sample searched in %.2fs at that nprobe, %.2fs exactly",
                nprobe, nlist, k, cal.recall, len(rows), options.recall,
                ", ".join(f"{p}:{r:.3f}" for p, r in curve.items()), cal.approx_seconds,
                cal.exact_seconds)
    if cal.recall < options.recall:
        logger.warning("recall target %.3f not reached even with every cell (%.4f): the "
                       "index's quantisation limits it; use index='ivf' or more pq_bytes",
                       options.recall, cal.recall)
    return cal


def approximate_knn(queries: np.ndarray, database: np.ndarray, k: int = 4,
                    options: ApproximateOptions | None = None
                    ) -> tuple[np.ndarray, np.ndarray, Calibration]:
    """Train, fill, calibrate and search one index over ``database``."""
    opt = options or ApproximateOptions()
    if not 1 <= k <= len(database):
        raise ConfigError(f"k must be between 1 and the database size {len(database)}, got {k}")
    index = fill_index(train_index(database, opt), database, opt.block)
    cal = choose_nprobe(index, queries, database, k, opt)
    D, I = search_index(index, queries, database, k, cal.nprobe, opt)  # noqa: E741
    return D, I, cal


def approximate_both(x: np.ndarray, y: np.ndarray, k: int = 4,
                     options: ApproximateOptions | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """k-NN lists in both directions (``x`` in ``y`` and ``y`` in ``x``), one index a side."""
    D_xy, I_xy, _ = approximate_knn(x, y, k, options)
    D_yx, I_yx, _ = approximate_knn(y, x, k, options)
    return D_xy, I_xy, D_yx, I_yx
