"""Exact block-wise k-nearest-neighbour search by inner product (cosine on unit rows).

Numpy in, numpy out, like faiss: ``D (n, k) float32`` similarities in descending
order and ``I (n, k) int64`` row indices. Inputs may be ``numpy.memmap`` of any
size: only one ``(block_rows, d)`` query block, one ``(block_cols, d)`` database
block and their ``(block_rows, block_cols)`` similarity block are in memory at a
time, plus the running top-k lists (``(n, k)`` per direction).

:func:`knn_both` serves margin mining: one pass over the similarity blocks of
``x`` against ``y`` gives the k-NN of every ``x`` row in ``y`` *and* of every
``y`` row in ``x``, so the matrix product is computed once, not twice as with two
separate searches.

Running top-k lists are merged behind a cheap filter: a block's maximum per row
(and per column) is compared with the list's current k-th best, and the top-k
selection runs only on the rows (columns) it beats. After the first blocks few
lists are touched, so selection costs a max-reduction instead of a top-k over
the whole block (a top-k along the column axis of a row-major block is slow).

With ``precision="bfloat16"`` the products are computed in bfloat16, a widened
list of ``candidates`` per row is kept, and those are re-scored exactly in
float32 before the final top-k. This pays off only on CPUs with native bfloat16
(AVX512-BF16, AMX); on AVX2-only cores float32 is faster.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from ..exceptions import ConfigError, ShapeError

logger = logging.getLogger(__name__)

Precision = Literal["float32", "bfloat16"]
_TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class KnnOptions:
    """Block sizes and precision of the exact search.

    Args:
        block_rows: query rows per block.
        block_cols: database rows per block.
        precision: ``float32`` (exact) or ``bfloat16`` (approximate products, then
            exact float32 re-scoring of ``candidates`` per row).
        candidates: rows kept per query before re-scoring (bfloat16 only); default
            ``max(2k, k + 16)``.
    """

    block_rows: int = 4096
    block_cols: int = 16384
    precision: Precision = "float32"
    candidates: int | None = None

    def __post_init__(self) -> None:
        if self.precision not in _TORCH:
            raise ConfigError(f"precision must be one of {tuple(_TORCH)}, got {self.precision!r}")
        if self.block_rows < 1 or self.block_cols < 1:
            raise ConfigError(f"block sizes must be >= 1, got {self.block_rows}, {self.block_cols}")

    def widened(self, k: int) -> int:
        if self.precision == "float32":
            return k
        return max(k, self.candidates or max(2 * k, k + 16))


class TopK:
    """Running top-``k`` lists for ``n`` rows: ``values (n, k)`` descending, ``indices (n, k)``."""

    def __init__(self, n: int, k: int) -> None:
        self.k = k
        self.values = torch.full((n, k), -torch.inf, dtype=torch.float32)
        self.indices = torch.full((n, k), -1, dtype=torch.int64)

    def update(self, sims: torch.Tensor, rows: slice, offset: int, axis: int) -> None:
        """Merge a similarity block into the lists of ``rows``.

        ``sims`` is ``(r, c)``; with ``axis=1`` its rows are this object's ``rows``
        and its columns are candidates ``offset + j``; with ``axis=0`` the roles swap.
        Only lists whose k-th best is beaten by the block's maximum are touched.
        """
        vals, idx = self.values[rows], self.indices[rows]  # views (len(rows), k)
        block_max = sims.amax(dim=axis).float()  # (len(rows),)
        active = (block_max > vals[:, -1]).nonzero().squeeze(1)
        if active.numel() == 0:
            return
        sub = sims.index_select(1 - axis, active)  # active lists only
        top_v, top_i = sub.topk(min(self.k, sims.shape[axis]), dim=axis)
        if axis == 0:
            top_v, top_i = top_v.T, top_i.T  # (active, kk)
        new_v = torch.cat([vals[active], top_v.float()], dim=1)
        new_i = torch.cat([idx[active], top_i + offset], dim=1)
        best_v, pos = new_v.topk(self.k, dim=1)
        vals[active] = best_v
        idx[active] = new_i.gather(1, pos)


def _as_2d(name: str, a: np.ndarray, dim: int | None = None) -> np.ndarray:
    if a.ndim != 2:
        raise ShapeError(f"{name} must be a 2-d (n, d) matrix, got shape {a.shape}")
    if dim is not None and a.shape[1] != dim:
        raise ShapeError(f"{name} has {a.shape[1]} features, but the other side has {dim}")
    return a


def _block(a: np.ndarray, start: int, stop: int, dtype: torch.dtype) -> torch.Tensor:
    rows = np.ascontiguousarray(a[start:stop], dtype=np.float32)
    if not rows.flags.writeable:  # a read-only memmap slice: torch wants its own copy
        rows = rows.copy()
    return torch.from_numpy(rows).to(dtype)


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
    return _search(queries, database, k, options or KnnOptions(), both=False)[:2]


def _search(x, y, k, opt: KnnOptions, both: bool):
    x = _as_2d("queries", x)
    y = _as_2d("database", y, x.shape[1])
    _check_k(k, y.shape[0], "database")
    if both:
        _check_k(k, x.shape[0], "query set")
    kc, dtype = opt.widened(k), _TORCH[opt.precision]
    fwd = TopK(x.shape[0], min(kc, y.shape[0]))
    bwd = TopK(y.shape[0], min(kc, x.shape[0])) if both else None
    for r0 in range(0, x.shape[0], opt.block_rows):
        r1 = min(r0 + opt.block_rows, x.shape[0])
        xb = _block(x, r0, r1, dtype)
        for c0 in range(0, y.shape[0], opt.block_cols):
            c1 = min(c0 + opt.block_cols, y.shape[0])
            sims = xb @ _block(y, c0, c1, dtype).T  # (r, c)
            fwd.update(sims, slice(r0, r1), c0, axis=1)
            if bwd is not None:
                bwd.update(sims, slice(c0, c1), r0, axis=0)
    out = _finish(fwd, x, y, k, opt)
    if bwd is not None:
        out += _finish(bwd, y, x, k, opt)
    return out


def _finish(top: TopK, q: np.ndarray, db: np.ndarray, k: int, opt: KnnOptions):
    if opt.precision == "float32":
        return [top.values.numpy(), top.indices.numpy()]
    return list(rescore(q, db, top.indices.numpy(), k, block=min(opt.block_rows, 1024)))


def rescore(queries: np.ndarray, database: np.ndarray, candidates: np.ndarray, k: int,
            block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Exact float32 top-``k`` among ``candidates (nq, c)`` database rows of each query."""
    nq, c = candidates.shape
    D = np.empty((nq, k), dtype=np.float32)
    I = np.empty((nq, k), dtype=np.int64)  # noqa: E741
    for r0 in range(0, nq, block):
        cand = candidates[r0 : r0 + block]  # (b, c)
        uniq, inverse = np.unique(cand, return_inverse=True)
        vecs = torch.from_numpy(np.ascontiguousarray(database[uniq], dtype=np.float32))
        q = _block(queries, r0, r0 + len(cand), torch.float32)
        sims = (q[:, None, :] * vecs[torch.from_numpy(inverse.reshape(cand.shape))]).sum(-1)
        best_v, pos = sims.topk(k, dim=1)
        D[r0 : r0 + len(cand)] = best_v.numpy()
        I[r0 : r0 + len(cand)] = np.take_along_axis(cand, pos.numpy(), axis=1)
    return D, I


def brute_force_knn(queries: np.ndarray, database: np.ndarray, k: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The numpy reference: full product, stable sort (ties by lower index). Small inputs only."""
    sims = np.asarray(queries, dtype=np.float64) @ np.asarray(database, dtype=np.float64).T
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1).astype(np.float32), order.astype(np.int64)
