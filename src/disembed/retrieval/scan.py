"""The pass over every similarity block: one worker per thread, each on its own row blocks.

The database is read in chunks of ``chunk_rows`` rows, converted once to the product's
dtype (piece by piece, so a memory-mapped float32 chunk is never copied whole). Within a
chunk the query row blocks are handed out in order to ``workers`` Python threads; each
multiplies its block with every column block of the chunk (``torch.mm`` on one thread:
no OpenMP barriers, which stall on a shared machine) and screens the result at once
(:func:`.topk.update_both`), while the other workers multiply. Torch releases the GIL
inside its operators, so the workers run in parallel; selection, formerly on one thread
beside two-thread products, now runs on every core.

The row lists are shared (each worker writes only the rows of its blocks); the column
lists of a chunk are one set per worker, merged after the chunk, so no worker waits for
another. Each worker owns one block buffer (no allocation per block); partial blocks
(the last rows or columns) are padded to multiples of the screen group with ``-inf``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..progress import progress_bar
from .profile import stage
from .topk import TopKLists, Window, update_both

CONVERT_ROWS = 8192  # rows converted at once (a float32 copy of them stays in cache)


def as_tensor(a: np.ndarray, start: int, stop: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows ``start..stop`` of ``a`` (array or memmap) as a new ``dtype`` tensor, converted
    ``CONVERT_ROWS`` at a time (no float32 copy of the whole range)."""
    stop = min(stop, a.shape[0])
    out = torch.empty((stop - start, a.shape[1]), dtype=dtype)
    for s in range(start, stop, CONVERT_ROWS):
        e = min(s + CONVERT_ROWS, stop)
        rows = np.ascontiguousarray(a[s:e], dtype=np.float32)
        if not rows.flags.writeable:  # a read-only memmap slice: torch wants its own copy
            rows = rows.copy()
        out[s - start : e - start] = torch.from_numpy(rows)
    return out


def run_parallel(fn, items, workers: int, cancel=None) -> None:
    """``fn(item)`` for every item, on ``workers`` threads of one torch thread each (the
    context, e.g. an active profile, is copied into each). If the caller's thread is
    interrupted (Ctrl-C) or a job fails, ``cancel()`` is called before the running jobs
    are waited for, so that they can stop early."""
    items = list(items)
    workers = max(1, min(workers, len(items)))
    if workers == 1:
        for item in items:
            fn(item)
        return
    ctx = contextvars.copy_context()
    with _torch_threads(1), ThreadPoolExecutor(workers) as pool:
        jobs = [pool.submit(ctx.copy().run, fn, item) for item in items]
        try:
            wait(jobs, return_when=FIRST_EXCEPTION)
            for job in jobs:
                if job.done():
                    job.result()  # the first error, raised here
            for job in jobs:
                job.result()
        except BaseException:
            for job in jobs:
                job.cancel()
            if cancel is not None:
                cancel()
            raise


@dataclass(frozen=True)
class Blocks:
    rows: int
    cols: int
    chunk: int
    group: int


class _RowBlocks:
    """Hands out query row blocks in order to the workers, and counts the rows done."""

    def __init__(self, n: int, rows: int, bar) -> None:
        self._starts = iter(range(0, n, rows))
        self._lock = threading.Lock()
        self._bar = bar

    def stop(self) -> None:
        """Hand out no more blocks (the workers finish the one they hold)."""
        with self._lock:
            self._starts = iter(())

    def next(self) -> int | None:
        with self._lock:
            return next(self._starts, None)

    def done(self, rows: int) -> None:
        with self._lock:
            self._bar.update(rows)


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def scan(x: np.ndarray, y: np.ndarray, fwd: TopKLists, bwd: TopKLists | None, blocks: Blocks,
         dtype: torch.dtype, workers: int) -> None:
    """Every ``(blocks.rows, blocks.cols)`` product of ``x`` and ``y``, merged into the lists
    (row blocks evened out so that each worker gets as many, :func:`balanced_rows`)."""
    workers = max(1, min(workers, -(-x.shape[0] // blocks.rows)))
    blocks = replace(blocks, rows=balanced_rows(x.shape[0], blocks.rows, workers, blocks.group))
    chunks = range(0, y.shape[0], blocks.chunk)
    with progress_bar(x.shape[0] * len(chunks), "k-NN", unit="row") as bar:
        for s0 in chunks:
            with stage("copies"):
                chunk = as_tensor(y, s0, s0 + blocks.chunk, dtype)  # (<= chunk rows, d)
            col_lists = [_chunk_lists(bwd, s0, len(chunk)) for _ in range(workers)]
            queue = _RowBlocks(x.shape[0], blocks.rows, bar)
            run_parallel(lambda w, chunk=chunk, s0=s0, queue=queue, col_lists=col_lists: _work(
                x, chunk, fwd, col_lists[w], s0, queue, blocks, dtype), range(workers), workers,
                cancel=queue.stop)
            if bwd is not None:
                with stage("selection"):
                    for lists in col_lists:
                        bwd.merge_lists(lists, s0)


def _chunk_lists(bwd: TopKLists | None, s0: int, rows: int) -> TopKLists | None:
    """Empty column lists for one worker and one chunk (its window sliced to the chunk)."""
    if bwd is None:
        return None
    window = bwd.window
    if window is not None:
        window = Window(window.keep, window.rel, window.slack[s0 : s0 + rows])
    return TopKLists(rows, bwd.k, window)


def _work(x: np.ndarray, chunk: torch.Tensor, fwd: TopKLists, bwd: TopKLists | None, s0: int,
          queue: _RowBlocks, blocks: Blocks, dtype: torch.dtype) -> None:
    """One worker: take row blocks until none is left; multiply and screen each. A failure
    stops the queue here, in the failing thread, before the error reaches the caller: the
    other workers take no further block, however late the caller's thread is scheduled."""
    try:
        _take_blocks(x, chunk, fwd, bwd, s0, queue, blocks, dtype)
    except BaseException:
        queue.stop()
        raise


def _take_blocks(x: np.ndarray, chunk: torch.Tensor, fwd: TopKLists, bwd: TopKLists | None,
                 s0: int, queue: _RowBlocks, blocks: Blocks, dtype: torch.dtype) -> None:
    g = blocks.group
    rows_pad, cols_pad = _pad(blocks.rows, g), _pad(min(blocks.cols, len(chunk)), g)
    buf = torch.empty(rows_pad * cols_pad, dtype=dtype)
    while (r0 := queue.next()) is not None:
        with stage("copies"):
            xb = as_tensor(x, r0, r0 + blocks.rows, dtype)  # (r, d)
        r, rp = len(xb), _pad(len(xb), g)
        hits: list = []  # the column lists' entries from this row block, merged in batches
        for c0 in range(0, len(chunk), blocks.cols):
            yb = chunk[c0 : c0 + blocks.cols]  # (c, d)
            c, cp = len(yb), _pad(len(yb), g)
            sims = buf[: rp * cp].view(rp, cp)
            with stage("products"):
                if (rp, cp) != (r, c):
                    sims.fill_(-torch.inf)
                torch.mm(xb, yb.T, out=sims[:r, :c])
            with stage("selection"):
                update_both(sims, r, c, fwd, r0, bwd, s0 + c0, g, first_list=c0,
                            column_hits=hits)
                _merge_hits(bwd, hits, rows_pad * cols_pad)
        _merge_hits(bwd, hits, 1)
        queue.done(r)


def _merge_hits(bwd: TopKLists | None, hits: list, at_least: int) -> None:
    """Merge the column lists' pending entries once there are ``at_least`` of them (then
    empties ``hits``). Merged at the end of each row block alone, ties (duplicated rows:
    every entry passes a column list's screen) held a row block's entries against the
    whole chunk at once, ``rows x 1M`` (issue 48: BUCC's language parts, tens of GB);
    merged once a block's worth is pending, memory stays bounded by the block. Each
    column block touches its own column lists, so any batching keeps their order."""
    if not hits or sum(len(part[0]) for part in hits) < at_least:
        return
    bwd.merge_sparse(*(torch.cat(part) for part in zip(*hits, strict=True)))
    hits.clear()


def balanced_rows(n: int, rows: int, workers: int, group: int) -> int:
    """At most ``rows`` rows a block (a multiple of ``group`` where that fits), in a number
    of blocks that the workers share evenly: 40,000 rows in blocks of 4,096 on 2 workers
    would be 10 blocks, 5 each, but 100,000 would be 25, 13 against 12; blocks of 3,856
    make 26; 300 rows make 2 blocks of 160, one per worker."""
    if workers == 1:
        return rows
    per_worker = -(-n // (workers * rows))
    even = -(-n // (workers * per_worker))
    return min(rows, _pad(even, group))


def _pad(n: int, g: int) -> int:
    return -(-n // g) * g
