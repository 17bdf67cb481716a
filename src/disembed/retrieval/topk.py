"""Running top-k lists and the block screen that feeds them: exact, vectorised, two passes.

For a similarity block ``S (r, c)`` (rows: queries ``r0 + i``, columns: database rows
``c0 + j``) both directions are served from the same block:

1. **one pass over S**: maxima over groups of ``g`` consecutive rows, ``M (r/g, c)``
   (an outer reduction: contiguous, vectorised, memory-bound);
2. **screen on M** (``g`` times smaller): group ``a`` at column ``j`` can hold a new
   entry of a row list only if ``M[a, j]`` beats the smallest current k-th best of the
   group's rows, and of column ``j``'s list only if it beats that list's k-th best;
3. **gather** the ``g`` entries of each flagged ``(a, j)`` and keep the ones that beat
   their own row's or column's k-th best (a few per row over a whole search: after
   ``t`` columns a new entry enters a top-k with probability about ``k / t``);
4. **merge** those candidates into the lists: one sort of the candidates, one ``topk``
   over the touched lists beside their new entries (no Python loop).

Lists that are not yet full (the first block of each row or column) take a dense
path: ``topk`` along the rows; along the columns, the k-th largest group maximum is a
lower bound of the k-th best entry, so it serves as the first threshold. Like faiss'
result handlers (a heap per query fed only entries that beat its current k-th best),
but with the test done on group maxima, so that per block the full matrix is read
once, not once per direction.
"""

from __future__ import annotations

import contextlib

import torch

GROUP = 16  # rows per group in the screen
DENSE_FRACTION = 0.5  # above this share of flagged groups a dense top-k is cheaper


class TopKLists:
    """``n`` running lists of the ``k`` largest values: ``values (n, k)`` descending
    (``-inf`` where empty), ``indices (n, k) int64`` (``-1`` where empty)."""

    def __init__(self, n: int, k: int) -> None:
        self.n, self.k = n, k
        self.values = torch.full((n, k), -torch.inf, dtype=torch.float32)
        self.indices = torch.full((n, k), -1, dtype=torch.int64)

    def kth(self, start: int, stop: int) -> torch.Tensor:
        """``(stop - start,)`` current k-th best of each list (``-inf`` if not full)."""
        return self.values[start:stop, -1]

    def is_full(self, start: int, stop: int) -> bool:
        return not bool(torch.isneginf(self.kth(start, stop)).any())

    def merge_dense(self, start: int, vals: torch.Tensor, idx: torch.Tensor) -> None:
        """Merge ``vals, idx (r, m)`` into lists ``start .. start + r`` (every one)."""
        rows = slice(start, start + len(vals))
        v = torch.cat([self.values[rows], vals.float()], dim=1)
        i = torch.cat([self.indices[rows], idx], dim=1)
        best, pos = v.topk(self.k, dim=1)
        self.values[rows] = best
        self.indices[rows] = i.gather(1, pos)

    def merge_sparse(self, rows: torch.Tensor, idx: torch.Tensor, vals: torch.Tensor) -> None:
        """Merge candidates ``(rows[p], idx[p], vals[p])``, any number per list.

        One sort of the ``p`` candidates (by list, then value) keeps at most ``k`` per
        list; those are laid out as ``(u, k)`` beside the ``u`` touched lists and one
        ``topk`` over the ``(u, 2k)`` rows gives the new lists.
        """
        if rows.numel() == 0:
            return
        k = self.k
        order = torch.sort(_row_then_value_desc(rows, vals)).indices
        rows, idx, vals = rows[order], idx[order], vals[order]
        rank = _rank_in_run(rows)
        keep = (rank < k).nonzero().squeeze(1)
        rows, idx, vals, rank = rows[keep], idx[keep], vals[keep], rank[keep]
        starts = rank == 0
        touched = rows[starts]  # (u,) ascending, one per list
        slot = torch.cumsum(starts, 0) - 1  # which touched list each candidate belongs to
        new_v = torch.full((len(touched), k), -torch.inf, dtype=torch.float32)
        new_i = torch.full((len(touched), k), -1, dtype=torch.int64)
        new_v[slot, rank] = vals.float()
        new_i[slot, rank] = idx
        v = torch.cat([self.values[touched], new_v], dim=1)  # (u, 2k)
        i = torch.cat([self.indices[touched], new_i], dim=1)
        best, pos = v.topk(k, dim=1)
        self.values[touched] = best
        self.indices[touched] = i.gather(1, pos)


def _row_then_value_desc(rows: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """int64 keys ordering by ``rows`` ascending, then ``vals`` (as float32) descending."""
    bits = vals.float().contiguous().view(torch.int32)
    monotone = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # int order == float order
    low = (~monotone).to(torch.int64) + (1 << 31)  # descending, in [0, 2^32)
    return (rows.to(torch.int64) << 32) | low


def _rank_in_run(sorted_rows: torch.Tensor) -> torch.Tensor:
    """Position of each entry within its run of equal values (0 for the first of a run)."""
    n = len(sorted_rows)
    pos = torch.arange(n)
    new_run = torch.ones(n, dtype=torch.bool)
    new_run[1:] = sorted_rows[1:] != sorted_rows[:-1]
    run_start = torch.where(new_run, pos, torch.zeros_like(pos)).cummax(0).values
    return pos - run_start


def update_both(sims: torch.Tensor, r: int, fwd: TopKLists, r0: int,
                bwd: TopKLists | None, c0: int, group: int = GROUP) -> None:
    """Merge a block into the row lists ``fwd`` and (if given) the column lists ``bwd``.

    Args:
        sims: ``(rp, c)`` contiguous, ``rp`` a multiple of ``group``; rows ``r .. rp`` are
            padding filled with ``-inf``.
        r: real rows of the block (queries ``r0 .. r0 + r``).
        fwd: lists of the queries; candidates are ``c0 + j``.
        bwd: lists of the database rows ``c0 .. c0 + c``; candidates are ``r0 + i``.
    """
    rp, c = sims.shape
    screen_rows = fwd.is_full(r0, r0 + r)
    if not screen_rows:
        v, i = sims[:r].topk(min(fwd.k, c), dim=1)
        fwd.merge_dense(r0, v, i + c0)
    if bwd is None and not screen_rows:
        return
    blocks = sims.view(rp // group, group, c)  # (groups, g, c)
    gmax = blocks.amax(dim=1)  # (groups, c): the one full pass, on every thread
    with _one_thread():  # the rest is many small steps: no OpenMP barriers between them
        _screen(blocks, gmax, r, fwd if screen_rows else None, r0, bwd, c0)


def _screen(blocks: torch.Tensor, gmax: torch.Tensor, r: int, fwd: TopKLists | None, r0: int,
            bwd: TopKLists | None, c0: int) -> None:
    """Steps 2-4 of the module docstring for the lists given (``None``: done densely)."""
    groups, group, c = blocks.shape
    rp = groups * group
    inf = torch.full((1,), torch.inf)
    row_thr = torch.cat([fwd.kth(r0, r0 + r), inf.expand(rp - r)]) if fwd else None
    col_thr = _column_thresholds(gmax, bwd, c0, -(-r // group)) if bwd else None
    lo = _lowest(row_thr, col_thr, group)  # (groups, c) or broadcastable
    a, j = (gmax > lo).nonzero(as_tuple=True)  # flagged (group, column) pairs
    if a.numel() == 0:
        return
    if a.numel() > DENSE_FRACTION * gmax.numel():  # thresholds still weak: go dense
        _dense(blocks.view(rp, c), r, fwd, r0, bwd, c0)
        return
    vals = blocks[a, :, j].reshape(-1)  # (p * g,): the g entries of each flagged pair
    rows = (a[:, None] * group + torch.arange(group)).reshape(-1)  # block-local rows
    cols = j.repeat_interleave(group)
    if fwd is not None:
        hit = (vals > row_thr[rows]).nonzero().squeeze(1)
        fwd.merge_sparse(r0 + rows[hit], c0 + cols[hit], vals[hit])
    if bwd is not None:
        hit = (vals > col_thr[cols]).nonzero().squeeze(1)
        bwd.merge_sparse(c0 + cols[hit], r0 + rows[hit], vals[hit])


@contextlib.contextmanager
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _column_thresholds(gmax: torch.Tensor, bwd: TopKLists, c0: int, real_groups: int
                       ) -> torch.Tensor:
    """``(c,)`` float32: each column list's k-th best, or for a list not yet full a lower
    bound of the block's own k-th best (the k-th largest group maximum, made inclusive)."""
    thr = bwd.kth(c0, c0 + gmax.shape[1]).clone()
    empty = torch.isneginf(thr)
    if bool(empty.any()) and real_groups >= bwd.k:
        kth_group = gmax[:real_groups].topk(bwd.k, dim=0).values[-1].float()  # (c,)
        inclusive = torch.nextafter(kth_group, torch.tensor(-torch.inf))  # x > t  <=>  x >= kth
        thr = torch.where(empty, inclusive, thr)
    return thr


def _lowest(row_thr: torch.Tensor | None, col_thr: torch.Tensor | None, group: int
            ) -> torch.Tensor:
    """The screen threshold of each (group, column): the lower of the two lists' bars."""
    if row_thr is None:
        return col_thr[None, :]
    group_min = row_thr.view(-1, group).amin(dim=1)[:, None]  # (groups, 1)
    return group_min if col_thr is None else torch.minimum(group_min, col_thr[None, :])


def _dense(sims, r, fwd, r0, bwd, c0) -> None:
    """Plain top-k of the block for the lists given."""
    c = sims.shape[1]
    if fwd is not None:
        v, i = sims[:r].topk(min(fwd.k, c), dim=1)
        fwd.merge_dense(r0, v, i + c0)
    if bwd is not None:
        v, i = sims[:r].topk(min(bwd.k, r), dim=0)  # (kk, c)
        bwd.merge_dense(c0, v.T, i.T + r0)
