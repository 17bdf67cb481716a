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

Top-k selection is the part to make fast, not the product: a plain top-k over
each block costs about as much as the product (and along the column axis of a
row-major block several times more). Here a block's maximum per row (column) is
first compared with the list's current k-th best, so only lists it beats are
touched; and selection is two-stage (:func:`grouped_topk`): maxima over groups
of 16 neighbours, top-k over those, then top-k over the ``16k`` entries of the
chosen groups. Both stages are exact.

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
from ..progress import progress_bar

logger = logging.getLogger(__name__)


def normalize_rows(X: np.ndarray) -> np.ndarray:
    """``X (n, d)`` with unit rows (zero rows stay zero), float32."""
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, 1e-12)

Precision = Literal["float32", "bfloat16"]
_TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_GROUP = 16  # neighbours per group in the two-stage top-k
_SUBSET_FRACTION = 0.25  # below this share of touched lists, select on a copy of just those


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
        gmax = group_max(sims, axis)  # (lists, groups) or None
        block_max = (gmax.amax(1) if gmax is not None else sims.amax(dim=axis)).float()
        active = (block_max > vals[:, -1]).nonzero().squeeze(1)
        if active.numel() == 0:
            return
        if active.numel() < _SUBSET_FRACTION * len(block_max):
            sub = sims.index_select(1 - axis, active)
            top_v, top_i = grouped_topk(sub, self.k, axis, None if gmax is None else gmax[active])
        else:
            top_v, top_i = grouped_topk(sims, self.k, axis, gmax)
            top_v, top_i = top_v[active], top_i[active]
        new_v = torch.cat([vals[active], top_v.float()], dim=1)
        new_i = torch.cat([idx[active], top_i + offset], dim=1)
        best_v, pos = new_v.topk(self.k, dim=1)
        vals[active] = best_v
        idx[active] = new_i.gather(1, pos)


def group_max(sims: torch.Tensor, axis: int, group: int = _GROUP) -> torch.Tensor | None:
    """Maxima over consecutive groups of ``group`` entries along ``axis`` of ``sims (r, c)``,
    as ``(lists, n / group)``; ``None`` when that axis is too short or not a multiple."""
    n = sims.shape[axis]
    if n % group or n < 16 * group:
        return None
    if axis == 1:
        return sims.view(sims.shape[0], n // group, group).amax(2)  # (r, n/g)
    return sims.view(n // group, group, sims.shape[1]).amax(1).T  # (c, n/g)


def grouped_topk(sims: torch.Tensor, k: int, axis: int, gmax: torch.Tensor | None = None,
                 group: int = _GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-``k`` along ``axis`` of ``sims (r, c)``: ``values, indices (lists, k)``.

    Each list is cut into groups of ``group`` neighbours; the top k entries lie in
    the k groups with the largest maxima (``gmax``, from :func:`group_max`), so the
    selection runs over the group maxima (``group`` times fewer) and then over the
    ``k * group`` entries of the chosen groups.
    """
    n = sims.shape[axis]
    k = min(k, n)
    if gmax is None or gmax.shape[1] < 4 * k:  # small or ragged: plain selection
        v, i = sims.topk(k, dim=axis)
        return (v, i) if axis == 1 else (v.T, i.T)
    offsets = torch.arange(group)
    gi = gmax.topk(k, dim=1).indices  # (lists, k)
    members = (gi[:, :, None] * group + offsets).reshape(len(gi), k * group)  # (lists, k*g)
    if axis == 1:
        v, pos = sims.gather(1, members).topk(k, dim=1)
        return v, members.gather(1, pos)
    v, pos = sims.gather(0, members.T).topk(k, dim=0)  # (k, lists)
    return v.T, members.T.gather(0, pos).T


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
    with progress_bar(x.shape[0], "k-NN", unit="row") as bar:
        for r0 in range(0, x.shape[0], opt.block_rows):
            r1 = min(r0 + opt.block_rows, x.shape[0])
            xb = _block(x, r0, r1, dtype)
            for c0 in range(0, y.shape[0], opt.block_cols):
                c1 = min(c0 + opt.block_cols, y.shape[0])
                sims = xb @ _block(y, c0, c1, dtype).T  # (r, c)
                fwd.update(sims, slice(r0, r1), c0, axis=1)
                if bwd is not None:
                    bwd.update(sims, slice(c0, c1), r0, axis=0)
            bar.update(r1 - r0)
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
