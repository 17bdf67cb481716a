"""Exact top-k from bfloat16 products: a candidate window, float32 re-scoring, a certificate.

A bfloat16 product ``s~ = bf16(fl(x~ . y~))`` (inputs rounded to bfloat16, sums in
float32, output rounded to bfloat16) differs from the float32 score ``s = x . y`` by

    |x~.y~ - x.y| <= ||x~ - x|| ||y|| + ||x~|| ||y~ - y||        (x~y~ - xy = (x~-x)y + x~(y~-y))
    |fl(x~.y~) - x~.y~| <= gamma_d ||x~|| ||y~||,  gamma_d = d 2^-24 / (1 - d 2^-24)
    fl <= s~ + 2^-7 |s~|                                    (one bf16 ulp: rounding or truncation)

so a database row whose bfloat16 score is at most ``m`` has a float32 score of at most
``m + delta(m)``, ``delta(v) = 2^-7 |v| + A`` with

    A = e_x ||y||max + ||x~|| e_y,max + gamma_d (||x~|| ||y~||max + ||x|| ||y||max)

(``e = ||x~ - x||`` per row, :class:`RoundingStats`; the last term also covers the
float32 rounding of the re-scored value). :func:`slack` gives ``A`` per list.

Each list keeps as candidates every database row whose bfloat16 score is above its final
threshold ``m`` (:mod:`.topk`: the ``k'``-th best, raised to the :func:`window` cut
``v - 1.5 delta(v)`` below the ``k``-th best ``v``; on sparse data the window holds a few
rows, on dense data the ``k'`` cap binds). :func:`exact_lists` re-scores the candidates in
float64, rounded to float32 (a function of the two rows alone), orders them by score,
lower index first on ties, and certifies a list when its ``k``-th score is **strictly**
above ``m + delta(m)``: then every row left out scores strictly lower, and the list is the
brute-force answer with ties to the lower index. Where the window binds, the certificate
holds unless the ``k``-th score's actual bfloat16 error exceeds about half of ``delta`` (a
worst case: Cauchy-Schwarz on the input rounding, one full ulp on the output), and a
window of ``2.02 delta`` would make it hold always; the narrower one keeps fewer entries.
Lists without the certificate are searched again (:mod:`.knn`).

Float32 products get the same treatment (:mod:`.products`, which also holds the window
both precisions cut by).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from .scan import run_parallel

logger = logging.getLogger(__name__)

ULP_BF16 = 2.0**-7  # relative size of one bfloat16 ulp (8 significant bits)
U_FP32 = 2.0**-24
_TINY = 2.0**-50  # below this a row's statistics are computed in float64
_LISTS = 4096  # lists per re-scoring task
_GATHER = 64  # lists gathered at once (their rows stay in cache)


@dataclass
class RoundingStats:
    """Per-row rounding of a matrix to bfloat16, as upper bounds within ~1e-6 relative of
    the float64 values: ``err`` >= ||x~ - x||, ``norm`` >= ||x||, ``norm_bf`` >= ||x~||,
    all ``(n,) float64``."""

    err: np.ndarray
    norm: np.ndarray
    norm_bf: np.ndarray

    @classmethod
    def of(cls, a: np.ndarray, block: int = 8192, workers: int = 1) -> RoundingStats:
        """Float32 norms (one vectorised pass) inflated by their rounding bound; rows too
        small or too large for that (squares that underflow or overflow) in float64.
        Blocks of ``block`` rows on ``workers`` threads."""
        err, norm, norm_bf = (np.empty(len(a)) for _ in range(3))

        def one(s: int) -> None:
            x = torch.from_numpy(np.array(a[s : s + block], dtype=np.float32))
            xb = x.to(torch.bfloat16).float()
            rows = slice(s, s + len(x))
            err[rows], norm[rows], norm_bf[rows] = (_norm_upper(v) for v in (xb - x, x, xb))

        run_parallel(one, range(0, len(a), block), workers)
        return cls(err, norm, norm_bf)

    def rows(self, idx: np.ndarray) -> RoundingStats:
        """The statistics of rows ``idx``."""
        return RoundingStats(self.err[idx], self.norm[idx], self.norm_bf[idx])


def _norm_upper(v: torch.Tensor) -> np.ndarray:
    """``(n,)`` upper bounds of the rows' Euclidean norms: float32, inflated by the bound on
    its rounding (squares, sum, square root); float64 where float32 under- or overflows."""
    d = v.shape[1]
    up = torch.linalg.vector_norm(v, dim=1).double().numpy() * (1 + 2 * gamma(d + 2))
    off = ~((up >= _TINY) & np.isfinite(up))
    if off.any():
        exact = torch.linalg.vector_norm(v[torch.from_numpy(off)].double(), dim=1).numpy()
        up[off] = exact * (1 + 2.0**-48)  # float64 rounding, d << 2^20
    return up


def gamma(d: int) -> float:
    """Bound on the relative error of a float32 sum of ``d`` products."""
    return d * U_FP32 / (1 - d * U_FP32)


def slack(q: RoundingStats, db: RoundingStats, d: int) -> np.ndarray:
    """``(nq,)`` the part ``A`` of ``delta`` that does not depend on the score."""
    return (q.err * db.norm.max() + q.norm_bf * db.err.max()
            + gamma(d) * (q.norm_bf * db.norm_bf.max() + q.norm * db.norm.max()) + 1e-30)


def certified(kth_exact: np.ndarray, m: np.ndarray, q: RoundingStats, db: RoundingStats,
              d: int) -> np.ndarray:
    """``(nq,) bool``: rows whose k-th re-scored value ``kth_exact`` is strictly above every
    database row outside their bfloat16 candidates (``m``: the lists' final thresholds)."""
    return kth_exact.astype(np.float64) > _bar(m, slack(q, db, d), ULP_BF16)


def _bar(m: np.ndarray, a: np.ndarray, ulp: float) -> np.ndarray:
    """``m + delta(m)`` in float64 (``-inf`` for ``m = -inf``: no row was left out)."""
    m = m.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(m), -np.inf, m + ulp * np.abs(m) + a)


def exact_lists(values: torch.Tensor, indices: torch.Tensor, m: np.ndarray, queries, database,
                k: int, a: np.ndarray, ulp: float = ULP_BF16, workers: int = 1
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact top-``k`` of each list from its candidates, and its certificate.

    The candidates at or above ``m`` are re-scored in float64 and rounded to float32 (a
    function of the two rows only, as :func:`~.knn.canonical_lists` scores them); entries
    of the list below ``m`` are covered by the certificate like every row left out.

    Args:
        values, indices: ``(n, k')`` candidates, scores descending (``-inf``, ``-1``
            where empty).
        m: ``(n,)`` every database row outside the candidates scored at most this.
        queries, database: the float32 rows (arrays or memmaps).
        a, ulp: the lists' bound ``delta(v) = ulp |v| + a`` (:class:`Products`).
        workers: threads re-scoring blocks of lists at once.

    Returns:
        ``D (n, k) float32``, ``I (n, k) int64`` (equal scores: lower index first) and
        ``ok (n,) bool``, the certificate.
    """
    n = len(indices)
    idx = indices.numpy()
    needed = (values.numpy() >= m.astype(np.float32)[:, None]) & (idx >= 0)  # a prefix of each
    D = np.empty((n, k), dtype=np.float32)
    I = np.empty((n, k), dtype=np.int64)  # noqa: E741

    def one(r0: int) -> None:
        for s in range(r0, min(r0 + _LISTS, n), _GATHER):
            rows = slice(s, s + _GATHER)
            D[rows], I[rows] = _rescored(queries, database, idx[rows], needed[rows], s, k)

    run_parallel(one, range(0, n, _LISTS), workers)
    ok = D[:, k - 1].astype(np.float64) > _bar(m, a, ulp)
    return D, I, ok


def _rescored(queries, database, idx: np.ndarray, needed: np.ndarray, r0: int, k: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of ``idx (b, k')`` (re-scored where ``needed``) by score, then index."""
    width = max(k, int(needed.sum(axis=1).max()))
    idx = np.where(needed[:, :width], idx[:, :width], -1)
    q = np.asarray(queries[r0 : r0 + len(idx)], dtype=np.float64)  # (b, d)
    vecs = np.take(database, np.maximum(idx, 0), axis=0).astype(np.float64)  # (b, w, d)
    scores = np.matmul(vecs, q[:, :, None])[:, :, 0].astype(np.float32)
    scores[idx < 0] = -np.inf
    order = np.lexsort((idx, -scores), axis=1)[:, :k]  # score descending, then index
    return np.take_along_axis(scores, order, 1), np.take_along_axis(idx, order, 1)
