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

``precision``: ``"float32"``; ``"bfloat16"`` (products in bfloat16, up to
``candidates`` per list kept within a window below the k-th best, re-scored in float32
and certified against float32 brute force, :mod:`.bf16`); ``"auto"`` (the default)
takes bfloat16 where the hardware probe measures it faster than float32 (AVX512-BF16,
AMX), float32 elsewhere. All three return the float32 brute-force answer, ties to the
lower index. :func:`~.profile.knn_profile` times the stages (products, selection,
certification, copies).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from ..exceptions import ConfigError, ShapeError
from ..hardware import configure_threads, probe
from .bf16 import RoundingStats, exact_lists, slack, window
from .profile import paused, stage
from .scan import Blocks, scan
from .topk import GROUP, TopKLists

logger = logging.getLogger(__name__)

Precision = Literal["auto", "float32", "bfloat16"]
PRECISIONS = ("auto", "float32", "bfloat16")
_TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: candidates of the second bfloat16 search of lists the first could not certify
WIDE_CANDIDATES = 64


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
        if precision == "float32":
            return k
        return max(k, self.candidates or k + 8)


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
    configure_threads()
    precision = opt.resolved_precision()
    if precision == "float32":
        fwd = TopKLists(x.shape[0], k)
        bwd = TopKLists(y.shape[0], k) if both else None
        _scan(x, y, fwd, bwd, opt, torch.float32)
        out = [fwd.values.numpy(), fwd.indices.numpy()]
        return out + [bwd.values.numpy(), bwd.indices.numpy()] if both else out
    with stage("copies"):
        workers = configure_threads().threads
        stats_x, stats_y = (RoundingStats.of(a, workers=workers) for a in (x, y))
    return _bf16_search(x, y, k, opt, both, stats_x, stats_y, opt.widened(k, precision))


def _bf16_search(x, y, k: int, opt: KnnOptions, both: bool, stats_x: RoundingStats,
                 stats_y: RoundingStats, kc: int) -> list[np.ndarray]:
    """bfloat16 products, ``kc`` candidates a list, certified float32 answers."""
    fwd = _candidate_lists(stats_x, stats_y, k, kc, x.shape[1])
    bwd = _candidate_lists(stats_y, stats_x, k, kc, x.shape[1]) if both else None
    _scan(x, y, fwd, bwd, opt, torch.bfloat16)
    out = list(_exact_from_candidates(fwd, x, y, k, stats_x, stats_y, opt))
    if both:
        out += _exact_from_candidates(bwd, y, x, k, stats_y, stats_x, opt)
    return out


def _candidate_lists(stats_q: RoundingStats, stats_db: RoundingStats, k: int, kc: int, d: int
                     ) -> TopKLists:
    """Lists of ``min(kc, database rows)`` candidates, with the bfloat16 window unless they
    hold every database row."""
    n, m = len(stats_q.norm), len(stats_db.norm)
    return TopKLists(n, min(kc, m), window(stats_q, stats_db, d, k) if kc < m else None)


def _scan(x, y, fwd: TopKLists, bwd: TopKLists | None, opt: KnnOptions, dtype) -> None:
    """Every ``(block_rows, block_cols)`` product of ``x`` and ``y``, merged into the lists,
    on as many workers as :func:`configure_threads` chose threads (:mod:`.scan`)."""
    blocks = Blocks(opt.block_rows, opt.block_cols, opt.chunk_rows, opt.group)
    scan(x, y, fwd, bwd, blocks, dtype, configure_threads().threads)


def _exact_from_candidates(lists: TopKLists, q, db, k, stats_q, stats_db, opt
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Re-score the bfloat16 candidates in float32; search uncertified rows again exactly."""
    with stage("certification"):
        if lists.window is None:  # every database row is a candidate
            m = np.full(lists.n, -np.inf)
        else:
            m = lists.thresholds(0, lists.n).double().numpy()
        a = slack(stats_q, stats_db, q.shape[1])
        D, I, ok = exact_lists(lists.values, lists.indices, m, q, db, k, a,  # noqa: E741
                               configure_threads().threads)
    bad = np.flatnonzero(~ok)
    wide = lists.k < WIDE_CANDIDATES < db.shape[0]
    logger.info("bfloat16 k-NN: %d of %d lists certified, %d searched again in %s",
                len(ok) - len(bad), len(ok), len(bad),
                f"bfloat16 with {WIDE_CANDIDATES} candidates" if wide else "float32")
    if len(bad):
        with stage("fallback"), paused():
            q_bad = np.asarray(q[bad])
            if wide:  # most lists fail for want of candidates: a second bfloat16 search
                D[bad], I[bad] = _bf16_search(q_bad, db, k, opt, False, stats_q.rows(bad),
                                              stats_db, WIDE_CANDIDATES)
            else:
                exact = KnnOptions(block_rows=opt.block_rows, block_cols=opt.block_cols,
                                   precision="float32", chunk_rows=opt.chunk_rows,
                                   group=opt.group)
                D[bad], I[bad] = canonical_lists(q_bad, db, *knn(q_bad, db, k, exact))
    return D, I


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
