"""Running top-k lists and the block screen that feeds them: exact, vectorised, one thread.

For a similarity block ``S (rp, cp)`` (rows: queries ``r0 + i``, columns: database rows
``c0 + j``; rows past ``r`` and columns past ``c`` are padding, ``-inf``) both directions
are served from the same block, each by its own screen:

1. **group maxima**, one pass over ``S`` per direction, each an outer reduction
   (contiguous, vectorised): for the column lists the maxima over ``g`` consecutive rows,
   ``(rp/g, cp)``; for the row lists the maxima over ``g`` columns ``cp/g`` apart,
   ``(rp, cp/g)`` (strided, so that the reduction stays an outer one);
2. **screen** the maxima (``g`` times fewer) against each list's own threshold: a group
   can hold a new entry only if its maximum beats it;
3. **gather** the ``g`` entries of each flagged group and keep those that beat the
   threshold (after ``t`` columns a new entry enters a top-k with probability ~``k/t``);
4. **merge** them into the lists: one sort of the candidates, one ``topk`` over the
   touched lists beside their new entries (no Python loop).

A list's **threshold**: an entry at or below it can never be among the list's final
entries, so it is dropped. It is the list's current ``k``-th best (``-inf`` while not
full), raised, while the list is not yet full, by a lower bound from the block itself
(the ``k``-th largest group maximum of the list, made inclusive: each group maximum is a
distinct entry). Lists with a **window** (:class:`Window`: the bfloat16 search's
candidates) keep only entries within ``rel |v| + slack`` below their ``keep``-th best
``v``: the threshold is at least that cut, which on sparse data is far above the ``k``-th
best, so that few entries are gathered and merged. Thresholds only rise, so everything a
list dropped is at or below its final threshold (:meth:`TopKLists.thresholds`).

Every call runs on the calling thread (:mod:`.scan` runs one worker per core), so there
are no OpenMP barriers between the many small steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GROUP = 16  # entries per group of the screen
_NEG_INF = torch.tensor(-torch.inf)


@dataclass(frozen=True)
class Window:
    """Keep only entries above ``keep``-th best ``v`` minus ``rel * |v| + slack[list]``."""

    keep: int
    rel: float
    slack: torch.Tensor  # (n,) float32, >= 0

    def cut(self, kth: torch.Tensor, slack: torch.Tensor) -> torch.Tensor:
        """Strictly below ``kth`` (``-inf`` stays ``-inf``), nondecreasing in ``kth``;
        ``slack``: that of the lists of ``kth``."""
        return torch.nextafter(kth - (self.rel * kth.abs() + slack), _NEG_INF)


class TopKLists:
    """``n`` running lists of the ``k`` largest values: ``values (n, k)`` descending
    (``-inf`` where empty), ``indices (n, k) int64`` (``-1`` where empty)."""

    def __init__(self, n: int, k: int, window: Window | None = None) -> None:
        self.n, self.k = n, k
        self.window = window if window is not None and window.keep <= k else None
        self.values = torch.full((n, k), -torch.inf, dtype=torch.float32)
        self.indices = torch.full((n, k), -1, dtype=torch.int64)
        self._thr = torch.full((n,), -torch.inf, dtype=torch.float32)  # kept up to date

    def kth(self, start: int, stop: int) -> torch.Tensor:
        """``(stop - start,)`` current k-th best of each list (``-inf`` if not full)."""
        return self.values[start:stop, -1]

    def is_full(self, start: int, stop: int) -> bool:
        return not bool(torch.isneginf(self.kth(start, stop)).any())

    def settled(self, start: int, stop: int) -> bool:
        """Every list ``start..stop`` has its own threshold above ``-inf`` (full, or, with a
        window, holding ``keep`` entries): a bound from a block rarely raises it then."""
        return not bool(torch.isneginf(self._thr[start:stop]).any())

    def thresholds(self, start: int, stop: int) -> torch.Tensor:
        """``(stop - start,)``: entries at or below these are dropped by lists ``start..stop``
        (the ``k``-th best, raised to the window's cut; a view, kept up to date)."""
        return self._thr[start:stop]

    def _threshold_of(self, values: torch.Tensor, rows) -> torch.Tensor:
        thr = values[:, -1]
        if self.window is not None:
            cut = self.window.cut(values[:, self.window.keep - 1], self.window.slack[rows])
            thr = torch.maximum(thr, cut)
        return thr

    @property
    def bound_rank(self) -> int:
        """How many of a list's largest values :meth:`bound_thresholds` reads: ``keep``
        with a window (its cut is what binds), else ``k``."""
        return self.window.keep if self.window is not None else self.k

    def bound_thresholds(self, lower: torch.Tensor, start: int) -> torch.Tensor:
        """Thresholds of lists ``start..`` from ``lower (u, bound_rank)``: descending values
        that are each at most a distinct entry of the list (group maxima of a block)."""
        if self.window is not None:
            slack = self.window.slack[start : start + len(lower)]
            return self.window.cut(lower[:, self.window.keep - 1], slack)
        return torch.nextafter(lower[:, -1], _NEG_INF)  # inclusive: x > t <=> x >= kth

    def merge_sparse(self, rows: torch.Tensor, idx: torch.Tensor, vals: torch.Tensor) -> None:
        """Merge candidates ``(rows[p], idx[p], vals[p])``, any number per list.

        One sort of the ``p`` candidates (by list, then value) keeps at most ``k`` per
        list; those are laid out as ``(u, h)`` (``h``: the most any list got) beside the
        ``u`` touched lists, and one stable sort of the ``(u, k + h)`` rows gives the new
        lists. Candidates must come in index order within a list, each above the list's
        entries (the scan's order): equal values then keep the lower index.
        """
        if rows.numel() == 0:
            return
        k = self.k
        # stable: equal values of a list stay in arrival order, which is index order
        order = torch.sort(_row_then_value_desc(rows, vals), stable=True).indices
        rows, idx, vals = rows[order], idx[order], vals[order]
        rank = _rank_in_run(rows)
        keep = (rank < k).nonzero().squeeze(1)
        rows, idx, vals, rank = rows[keep], idx[keep], vals[keep], rank[keep]
        starts = rank == 0
        touched = rows[starts]  # (u,) ascending, one per list
        slot = torch.cumsum(starts, 0) - 1  # which touched list each candidate belongs to
        h = int(rank.max()) + 1
        new_v = torch.full((len(touched), h), -torch.inf, dtype=torch.float32)
        new_i = torch.full((len(touched), h), -1, dtype=torch.int64)
        new_v[slot, rank] = vals.float()
        new_i[slot, rank] = idx
        self._merge_rows(touched, new_v, new_i, in_index_order=True)

    def merge_lists(self, other: TopKLists, start: int = 0) -> None:
        """Merge the lists of ``other`` (any ``k``, any indices) into lists ``start ..
        start + other.n``; equal values keep the lower index."""
        self._merge_rows(slice(start, start + other.n), other.values, other.indices,
                         in_index_order=False)

    def _merge_rows(self, rows, new_v: torch.Tensor, new_i: torch.Tensor,
                    in_index_order: bool) -> None:
        v = torch.cat([self.values[rows], new_v], dim=1)
        i = torch.cat([self.indices[rows], new_i], dim=1)
        if in_index_order:  # a stable sort keeps the lower index first among equals
            pos = v.sort(dim=1, descending=True, stable=True).indices[:, : self.k]
        else:
            pos = _value_then_index_key(v, i).topk(self.k, dim=1).indices
        best = v.gather(1, pos)
        self.values[rows] = best
        self.indices[rows] = i.gather(1, pos)
        self._thr[rows] = self._threshold_of(best, rows)


def _row_then_value_desc(rows: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """int64 keys ordering by ``rows`` ascending, then ``vals`` (as float32) descending."""
    bits = vals.float().contiguous().view(torch.int32)
    monotone = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)  # int order == float order
    low = (~monotone).to(torch.int64) + (1 << 31)  # descending, in [0, 2^32)
    return (rows.to(torch.int64) << 32) | low


def _value_then_index_key(vals: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """int64 keys whose largest are the largest ``vals``, then the lowest ``idx`` (an
    empty slot, ``-1``, last among equals); ``0 <= idx < 2^32 - 1`` otherwise."""
    bits = vals.contiguous().view(torch.int32)
    monotone = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int64)
    return (monotone << 32) | (0xFFFFFFFF - idx).bitwise_and_(0xFFFFFFFF)


def _rank_in_run(sorted_rows: torch.Tensor) -> torch.Tensor:
    """Position of each entry within its run of equal values (0 for the first of a run)."""
    n = len(sorted_rows)
    pos = torch.arange(n)
    new_run = torch.ones(n, dtype=torch.bool)
    new_run[1:] = sorted_rows[1:] != sorted_rows[:-1]
    run_start = torch.where(new_run, pos, torch.zeros_like(pos)).cummax(0).values
    return pos - run_start


def update_both(sims: torch.Tensor, r: int, c: int, fwd: TopKLists | None, r0: int,
                bwd: TopKLists | None, c0: int, group: int = GROUP, *,
                first_list: int | None = None, column_hits: list | None = None) -> None:
    """Merge a block into the row lists ``fwd`` and the column lists ``bwd`` (either ``None``).

    Args:
        sims: ``(rp, cp)`` contiguous, both multiples of ``group``; entries outside
            ``[:r, :c]`` are padding, ``-inf``.
        r, c: real rows (queries ``r0 .. r0 + r``) and columns (database rows ``c0 .. c0 + c``).
        fwd: lists of the queries; candidates are ``c0 + j``.
        bwd: lists of the database rows ``c0 .. c0 + c``; candidates are ``r0 + i``.
        first_list: the number of column ``c0``'s list in ``bwd`` (default ``c0``: a
            chunk's own lists start at 0).
        column_hits: if given, the column lists' new entries ``(lists, candidates,
            values)`` are appended to it instead of merged (a row block touches each
            column list once, so its blocks' entries can be merged in one call).
    """
    rp, cp = sims.shape
    view = sims.view(rp // group, group, cp)  # (a, t, j) is row a * group + t of column j
    b0 = c0 if first_list is None else first_list
    row_thr = _row_thresholds(sims, r, fwd, r0, group) if fwd is not None else None
    col_thr = _padded(bwd.thresholds(b0, b0 + c), cp) if bwd is not None else None
    gmax = _group_max(view, _nonnegative(row_thr, col_thr))  # (groups, cp): the one full pass
    if bwd is not None and not bwd.settled(b0, b0 + c):
        col_thr = _column_bound(gmax, c, bwd, b0, col_thr)
    a, j = _flagged(gmax, row_thr, col_thr, group)
    if a.numel() == 0:
        return
    vals = view[a, :, j]  # (p, group): the entries of each flagged group
    if row_thr is not None:
        pa, t = (vals > row_thr.view(-1, group)[a]).nonzero(as_tuple=True)
        fwd.merge_sparse(r0 + a[pa] * group + t, c0 + j[pa], vals[pa, t])
    if col_thr is not None:
        pa, t = (vals > col_thr[j][:, None]).nonzero(as_tuple=True)
        hits = (b0 + j[pa], r0 + a[pa] * group + t, vals[pa, t])
        if column_hits is None:
            bwd.merge_sparse(*hits)
        else:
            column_hits.append(hits)


_INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def _nonnegative(*thresholds: torch.Tensor | None) -> bool:
    return all(t is None or bool(t.min() >= 0) for t in thresholds)


def _group_max(view: torch.Tensor, nonnegative: bool) -> torch.Tensor:
    """Maxima over dim 1. With ``nonnegative`` thresholds only the maxima at or above 0
    matter; those are the maxima of the bit patterns read as integers (the sign bit makes
    every negative value smaller, and non-negative floats order as their bits do), which
    is 2.5x faster than a bfloat16 reduction. A group with no value >= 0 then gets some
    negative value of the group, which no threshold >= 0 passes."""
    as_int = _INT_VIEW.get(view.dtype) if nonnegative else None
    if as_int is None:
        return view.amax(dim=1)
    return view.view(as_int).amax(dim=1).view(view.dtype)


def _flagged(gmax: torch.Tensor, row_thr: torch.Tensor | None, col_thr: torch.Tensor | None,
             group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (group, column) pairs whose maximum beats a row's or the column's threshold."""
    flags = None
    if row_thr is not None:
        flags = gmax > row_thr.view(-1, group).amin(dim=1)[:, None]
    if col_thr is not None:
        col_flags = gmax > col_thr[None, :]
        flags = col_flags if flags is None else flags.logical_or_(col_flags)
    return flags.nonzero(as_tuple=True)


def _padded(thr: torch.Tensor, length: int) -> torch.Tensor:
    if len(thr) == length:
        return thr
    return torch.cat([thr, torch.full((length - len(thr),), torch.inf)])


def _row_thresholds(sims: torch.Tensor, r: int, lists: TopKLists, r0: int, group: int
                    ) -> torch.Tensor:
    """``(rp,)``: the row lists' thresholds (padding rows ``+inf``); lists not yet settled
    are raised to a bound from maxima over groups of ``group`` columns ``cp / group``
    apart (an outer reduction, so only then a second pass over the block)."""
    rp, cp = sims.shape
    thr = lists.thresholds(r0, r0 + r)
    stride = cp // group
    if stride >= lists.bound_rank and not lists.settled(r0, r0 + r):
        strided = sims[:r].view(r, group, stride).amax(dim=1)  # (r, stride)
        lower = strided.float().topk(lists.bound_rank, dim=1).values
        thr = torch.maximum(thr, lists.bound_thresholds(lower, r0))
    return _padded(thr, rp)


def _column_bound(gmax: torch.Tensor, c: int, lists: TopKLists, b0: int, thr: torch.Tensor
                  ) -> torch.Tensor:
    """``thr (cp,)`` raised, for column lists not yet settled, to a bound from the block's
    group maxima (each at most a distinct entry of the column)."""
    if len(gmax) < lists.bound_rank:
        return thr
    lower = gmax[:, :c].T.float().topk(lists.bound_rank, dim=1).values  # (c, rank)
    raised = torch.maximum(thr[:c], lists.bound_thresholds(lower, b0))
    return _padded(raised, gmax.shape[1])
