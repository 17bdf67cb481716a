"""Exact block-wise k-nearest-neighbour search by inner product (cosine on unit rows).

Numpy in, numpy out, like faiss: ``D (n, k) float32`` similarities in descending
order (equal ones: lower index first) and ``I (n, k) int64`` row indices. Inputs may be
``numpy.memmap`` of any size: the database is read in chunks of ``chunk_rows`` rows,
the queries in blocks of ``block_rows``; in memory are one chunk (in the product's
dtype), per worker one query block and one ``(block_rows, block_cols)`` similarity
block, and the running lists (``(n, k)`` per direction).

:func:`knn_both` serves margin mining: one pass over the similarity blocks of ``x``
against ``y`` gives the k-NN of every ``x`` row in ``y`` *and* of every ``y`` row in
``x``, so the matrix product is computed once, not twice as with two searches.

The pass (:mod:`.scan`) runs one worker per thread, each multiplying and screening its
own row blocks; selection (:mod:`.topk`) reads each block once after the product
(group maxima, a screen against each list's threshold, a few candidates merged with one
segmented sort; no Python loop over rows).

``precision``: the dtype of the products, ``"float32"`` or ``"bfloat16"``; ``"auto"``
(the default) takes bfloat16 where the hardware probe measures it faster than float32
(AVX512-BF16, AMX), float32 elsewhere. Either way each list keeps up to ``candidates``
within a window below its k-th best (the products' error bound, :mod:`.bf16`); the
candidates are re-scored in float64 and the list certified; lists the certificate
rejects are searched again with 64 candidates, then with float32 products, then in
float64 (:func:`float64_knn`). All return the same answer: the top-k by float64 scores
rounded to float32, equal ones by lower index. :func:`~.profile.knn_profile` times the
stages (products, selection, certification, copies).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..exceptions import ConfigError, ShapeError
from ..hardware import configure_threads, probe
from .bf16 import RoundingStats, exact_lists
from .products import BFLOAT16, FLOAT32, Products, window
from .profile import paused, stage
from .scan import Blocks, scan
from .topk import GROUP, TopKLists

logger = logging.getLogger(__name__)

Precision = Literal["auto", "float32", "bfloat16"]
PRECISIONS = ("auto", "float32", "bfloat16")
PRODUCTS = {"float32": FLOAT32, "bfloat16": BFLOAT16}
#: candidates of the second bfloat16 search of lists the first could not certify
WIDE_CANDIDATES = 64
#: more than this share of a float32 search's lists rejected: ties, searched in float64 at once
TIED = 0.5


def normalize_rows(X: np.ndarray) -> np.ndarray:
    """``X (n, d)`` with unit rows (zero rows stay zero), float32. The norms and the division
    are computed in float64, so finite rows of any size (1e38 overflows float32 when
    squared) are normalised right instead of becoming zeros or NaN."""
    X64 = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X64, axis=1, keepdims=True)
    return (X64 / np.maximum(norms, 1e-300)).astype(np.float32)


@dataclass
class KnnOptions:
    """Block sizes and precision of the exact search.

    Args:
        block_rows: query rows per similarity block (at most: the scan evens the blocks
            out over its workers). Large blocks: fewer early, weak-threshold blocks for
            the column lists; 4096 x 4096 is 32 MB per worker in bfloat16, 64 MB in
            float32.
        block_cols: database rows per similarity block.
        precision: ``auto`` (bfloat16 where measured faster, else float32), ``float32``
            or ``bfloat16`` (bfloat16 products, exact float32 re-scoring of
            ``candidates`` per list, certified; see module docstring).
        candidates: most candidates a list keeps for re-scoring (bfloat16 only); default
            ``k + 8``. Lists whose certificate fails for want of candidates are searched
            again in bfloat16 with ``WIDE_CANDIDATES``, then in float32.
        chunk_rows: database rows held in memory at once (float32 or bfloat16 copy).
        group: rows per group of the selection screen.
    """

    block_rows: int = 4096
    block_cols: int = 4096
    precision: Precision = "auto"
    candidates: int | None = None
    chunk_rows: int = 1 << 20
    group: int = GROUP

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if min(self.block_rows, self.block_cols, self.chunk_rows, self.group) < 1:
            raise ConfigError("block_rows, block_cols, chunk_rows and group must be >= 1, got "
                              f"{self.block_rows}, {self.block_cols}, {self.chunk_rows}, "
                              f"{self.group}")
        if self.candidates is not None and self.candidates < 1:
            raise ConfigError(f"candidates must be >= 1, got {self.candidates}")

    def resolved_precision(self) -> str:
        """``float32`` or ``bfloat16``: ``auto`` asks the hardware probe."""
        if self.precision != "auto":
            return self.precision
        return "bfloat16" if probe().bf16_faster else "float32"

    def widened(self, k: int, precision: str) -> int:
        """Candidates a list keeps: ``candidates``, else ``k + 8`` (bfloat16) or ``k + 4``
        (float32: only near-ties within its much smaller rounding bound need them)."""
        return max(k, self.candidates or k + (8 if precision == "bfloat16" else 4))


def _as_2d(name: str, a: np.ndarray, dim: int | None = None) -> np.ndarray:
    if a.ndim != 2:
        raise ShapeError(f"{name} must be a 2-d (n, d) matrix, got shape {a.shape}")
    if dim is not None and a.shape[1] != dim:
        raise ShapeError(f"{name} has {a.shape[1]} features, but the other side has {dim}")
    return a


def _check_k(k: int, n: int, what: str) -> None:
    if not 1 <= k <= n:
        raise ConfigError(f"k must be between 1 and the {what} size {n}, got {k}")


def knn_both(x: np.ndarray, y: np.ndarray, k: int = 4, options: KnnOptions | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """k-NN of ``x`` rows in ``y`` and of ``y`` rows in ``x`` from one pass of products.

    Args:
        x: ``(n, d)`` float32 (unit rows for cosine), array or memmap.
        y: ``(m, d)`` float32.
        k: neighbours per row.

    Returns:
        ``D_xy (n, k)``, ``I_xy (n, k)``, ``D_yx (m, k)``, ``I_yx (m, k)``.
    """
    return _search(x, y, k, options or KnnOptions(), both=True)


def knn(queries: np.ndarray, database: np.ndarray, k: int = 4,
        options: KnnOptions | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``D (nq, k) float32`` and ``I (nq, k) int64``: top-``k`` inner products of each query."""
    dist, idx = _search(queries, database, k, options or KnnOptions(), both=False)
    return dist, idx


def _search(x, y, k, opt: KnnOptions, both: bool) -> list[np.ndarray]:
    x = _as_2d("queries", x)
    y = _as_2d("database", y, x.shape[1])
    _check_k(k, y.shape[0], "database")
    if both:
        _check_k(k, x.shape[0], "query set")
    workers = configure_threads().threads
    precision = opt.resolved_precision()
    with stage("copies"):
        stats_x, stats_y = (RoundingStats.of(a, workers=workers) for a in (x, y))
    return _certified_search(x, y, k, opt, both, (stats_x, stats_y), PRODUCTS[precision],
                             opt.widened(k, precision))


def _certified_search(x, y, k: int, opt: KnnOptions, both: bool, stats: tuple,
                      products: Products, kc: int) -> list[np.ndarray]:
    """Products in ``products.dtype``, ``kc`` candidates a list, certified answers."""
    stats_x, stats_y = stats
    fwd = _candidate_lists(stats_x, stats_y, k, kc, x.shape[1], products)
    bwd = _candidate_lists(stats_y, stats_x, k, kc, x.shape[1], products) if both else None
    _scan(x, y, fwd, bwd, opt, products.dtype)
    out = list(_exact_from_candidates(fwd, x, y, k, stats, opt, products))
    if both:
        out += _exact_from_candidates(bwd, y, x, k, stats[::-1], opt, products)
    return out


def _candidate_lists(stats_q: RoundingStats, stats_db: RoundingStats, k: int, kc: int, d: int,
                     products: Products) -> TopKLists:
    """Lists of ``min(kc, database rows)`` candidates, with the window unless they hold
    every database row."""
    n, m = len(stats_q.norm), len(stats_db.norm)
    return TopKLists(n, min(kc, m), window(stats_q, stats_db, d, k, products) if kc < m else None)


def _scan(x, y, fwd: TopKLists, bwd: TopKLists | None, opt: KnnOptions, dtype) -> None:
    """Every ``(block_rows, block_cols)`` product of ``x`` and ``y``, merged into the lists,
    on as many workers as :func:`configure_threads` chose threads (:mod:`.scan`)."""
    blocks = Blocks(opt.block_rows, opt.block_cols, opt.chunk_rows, opt.group)
    scan(x, y, fwd, bwd, blocks, dtype, configure_threads().threads)


def _exact_from_candidates(lists: TopKLists, q, db, k, stats, opt, products: Products
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Re-score the candidates; search the rows without a certificate again."""
    stats_q, stats_db = stats
    with stage("certification"):
        if lists.window is None:  # every database row is a candidate
            m = np.full(lists.n, -np.inf)
        else:
            m = lists.thresholds(0, lists.n).double().numpy()
        a = products.slack(stats_q, stats_db, q.shape[1])
        D, I, ok = exact_lists(lists.values, lists.indices, m, q, db, k, a,  # noqa: E741
                               products.ulp, configure_threads().threads)
    bad = np.flatnonzero(~ok)
    tied = products is FLOAT32 and len(bad) > TIED * len(ok)
    again = _next_search(lists.k, db.shape[0], products, tied=tied)
    logger.info("%s k-NN: %d of %d lists certified, %d searched again in %s", products.name,
                len(ok) - len(bad), len(ok), len(bad), again[2])
    if len(bad):
        with stage("fallback"), paused():
            q_bad = np.asarray(q[bad])
            products, kc = again[:2]
            if products is None:
                D[bad], I[bad] = float64_knn(q_bad, db, k, block=opt.block_cols,
                                             cells=opt.block_rows * opt.block_cols // 4)
            else:
                kc = kc or opt.widened(k, products.name)
                D[bad], I[bad] = _certified_search(q_bad, db, k, opt, False,
                                                   (stats_q.rows(bad), stats_db), products, kc)
    return D, I


def _next_search(kc: int, m: int, products: Products, tied: bool = False) -> tuple:
    """``(products, candidates, name)`` of the search of lists a certificate rejected: the
    same products with ``WIDE_CANDIDATES`` (most fail for want of candidates), then float32
    products (their default candidates: ``None``), then float64 (``products None``).
    ``tied`` (float32 products rejected most lists: rows that repeat, or nearly, tie
    them below float32 resolution, which more candidates rarely settle): float64 at once.
    (bfloat16 rejecting every list is no sign of ties: near-ties at its resolution are
    settled by float32 products.)"""
    if tied:
        return None, None, "float64 (most lists tie)"
    if kc < WIDE_CANDIDATES < m:
        return products, WIDE_CANDIDATES, f"{products.name} with {WIDE_CANDIDATES} candidates"
    if products is BFLOAT16:
        return FLOAT32, None, "float32"
    return None, None, "float64"


#: float64 products held at once by :func:`float64_knn` (queries x database rows): 32 MB;
#: the search's fallback holds a quarter of its scan block (float64 and the selection's
#: copies: about the bytes of one float32 scan block)
FLOAT64_CELLS = 1 << 22


def float64_knn(queries: np.ndarray, database: np.ndarray, k: int, block: int = 8192,
                cells: int = FLOAT64_CELLS) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` by float64 products rounded to float32 (equal ones: lower index), database
    read in blocks of ``block`` rows; for the lists no certificate settles (long runs of
    exact ties: duplicated lines tie every list at once).

    Memory is bounded by the block, not by the number of queries: the queries of each
    database block are taken ``cells // block`` at a time, so at most ``cells`` products
    (and their selection's copies) exist at once, however many lists fall back. The
    selection reads each block once (:func:`_merge_block`: a partition for the k-th value,
    ties at it by index), never a full sort."""
    n, m = len(queries), database.shape[0]
    block = max(1, min(block, m))
    group = max(1, cells // block)
    best_v, best_i = _first_rows(queries, database, k, group)
    for s in range(k, m, block):
        rows_t = np.asarray(database[s : s + block], dtype=np.float64).T  # (d, b)
        for q0 in range(0, n, group):
            q = np.asarray(queries[q0 : q0 + group], dtype=np.float64)
            v = (q @ rows_t).astype(np.float32)
            # a row of this block enters a full list only above its k-th score: equal
            # ones lose the tie to the lower indices already kept
            enter = q0 + np.flatnonzero((v > best_v[q0 : q0 + group, k - 1 :]).any(axis=1))
            if len(enter):
                best_v[enter], best_i[enter] = _merge_block(best_v[enter], best_i[enter],
                                                            v[enter - q0], s, k)
    return best_v, best_i


def _first_rows(queries: np.ndarray, database: np.ndarray, k: int, group: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The lists of the first ``k`` database rows, sorted (score descending, then index)."""
    first_t = np.asarray(database[:k], dtype=np.float64).T  # (d, k)
    best_v = np.empty((len(queries), k), np.float32)
    best_i = np.empty((len(queries), k), np.int64)
    for q0 in range(0, len(queries), group):
        v = (np.asarray(queries[q0 : q0 + group], dtype=np.float64) @ first_t).astype(np.float32)
        order = np.lexsort((np.broadcast_to(np.arange(k), v.shape), -v), axis=1)
        best_v[q0 : q0 + len(v)], best_i[q0 : q0 + len(v)] = np.take_along_axis(v, order, 1), order
    return best_v, best_i


def _merge_block(best_v: np.ndarray, best_i: np.ndarray, v: np.ndarray, s: int, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of running lists ``best (g, k')`` (sorted: score descending, then
    index; every index below ``s``) and a block's scores ``v (g, b)`` of rows ``s..s+b``.
    Laid side by side, column order is index order among equal scores, so the ``k`` kept
    are: every score above the k-th largest, then the leftmost ones equal to it."""
    c = np.concatenate([best_v, v], axis=1)  # (g, k' + b)
    kth = -np.partition(-c, k - 1, axis=1)[:, k - 1 : k]
    above = c > kth
    at = c == kth
    room = k - above.sum(axis=1, keepdims=True)
    keep = above | (at & (np.cumsum(at, axis=1, dtype=np.int32) <= room))
    cols = np.nonzero(keep)[1].reshape(len(c), k)  # row-major: k per row, columns ascending
    vals = np.take_along_axis(c, cols, 1)
    kb = best_i.shape[1]
    idx = np.where(cols < kb, np.take_along_axis(best_i, np.minimum(cols, max(kb - 1, 0)), 1)
                   if kb else 0, s + cols - kb)
    order = np.lexsort((idx, -vals), axis=1)
    return np.take_along_axis(vals, order, 1), np.take_along_axis(idx, order, 1)


def rescore(queries: np.ndarray, database: np.ndarray, candidates: np.ndarray, k: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` among ``candidates (nq, c)`` database rows of each query (``-1``:
    none), scored as :func:`canonical_lists` does; equal scores: lower index first."""
    D, I = canonical_lists(queries, database, np.zeros(candidates.shape, np.float32),  # noqa: E741
                           candidates)
    return D[:, :k], I[:, :k]


def canonical_lists(queries: np.ndarray, database: np.ndarray, D: np.ndarray, I: np.ndarray,  # noqa: E741
                    block: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """``D`` recomputed pair by pair (float64 dot products rounded to float32), rows re-sorted.

    A similarity from a blocked matrix product depends, in its last bits, on the block
    shapes; this one depends only on the two vectors. Mining computes its margins from
    these, so a run on one machine and a run split into shards print the same scores.
    Equal rounded scores are ordered by lower index; ``-1`` entries (lists shorter than
    ``k``) get ``-inf`` and stay last. Only the shape of ``D`` is read."""
    out_D, out_I = np.empty_like(D, dtype=np.float32), np.empty_like(I)  # every row written
    for r0 in range(0, len(I), block):
        idx = I[r0 : r0 + block]
        q = np.asarray(queries[r0 : r0 + len(idx)], dtype=np.float64)
        valid = idx >= 0
        db = np.asarray(database[np.where(valid, idx, 0).ravel()], dtype=np.float64)
        dots = np.einsum("rkd,rd->rk", db.reshape(*idx.shape, q.shape[1]), q).astype(np.float32)
        dots[~valid] = -np.inf
        order = np.lexsort((idx, -dots), axis=1)
        out_D[r0 : r0 + len(idx)] = np.take_along_axis(dots, order, 1)
        out_I[r0 : r0 + len(idx)] = np.take_along_axis(idx, order, 1)
    return out_D, out_I


def brute_force_knn(queries: np.ndarray, database: np.ndarray, k: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The numpy reference: full product, stable sort (ties by lower index). Small inputs only."""
    sims = np.asarray(queries, dtype=np.float64) @ np.asarray(database).T  # promoted to float64
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1).astype(np.float32), order.astype(np.int64)
