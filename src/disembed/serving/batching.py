"""Micro-batching: concurrent requests share one encoder call.

Each request puts its texts on an asyncio queue and awaits a future. One collector
task takes the first waiting request, then keeps taking requests for up to ``window``
seconds or until ``max_batch`` texts are gathered, encodes the distinct texts of all of
them in one call on a worker thread (the event loop keeps accepting requests), and
hands each request its rows. Requests that arrive while a batch is encoding form the
next batch. A request larger than ``max_batch`` is encoded alone. When a batch fails, each of
its requests is encoded again by itself, so an error reaches only the request whose own texts
caused it (and shows it only those texts).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

logger = logging.getLogger(__name__)


@dataclass
class BatchStats:
    """Counters over the batcher's lifetime."""

    requests: int = 0
    batches: int = 0
    texts: int = 0  # texts requested
    encoded: int = 0  # distinct texts sent to the encoder
    largest: int = 0  # most requests in one batch
    sizes: list[int] = field(default_factory=list, repr=False)  # requests per batch (last 1000)


class MicroBatcher:
    """Gathers concurrent ``encode`` calls into batches; see the module docstring.

    Args:
        encode: ``texts -> (n, d) float32``, called on one worker thread.
        max_batch: most texts per encoder call (a single larger request still goes alone).
        window: seconds to wait for more requests after the first one arrives.
    """

    def __init__(self, encode: Callable[[list[str]], np.ndarray], *, max_batch: int = 64,
                 window: float = 0.005,
                 on_batch: Callable[[int, int], None] | None = None) -> None:
        if int(max_batch) < 1 or not window >= 0:
            raise ValueError(f"max_batch must be >= 1 and window >= 0; got {max_batch}, {window}")
        self._encode, self.max_batch, self.window = encode, int(max_batch), float(window)
        self._on_batch = on_batch  # (requests, distinct texts) of every encoder call
        self.stats = BatchStats()
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self._carry: tuple | None = None  # a request that did not fit the last batch
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disembed-encode")

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._collect())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def encode(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), d) float32`` raw embeddings, encoded together with concurrent calls."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not awaited")
        future = asyncio.get_running_loop().create_future()
        await self._queue.put((texts, future))
        return await future

    async def _gather(self) -> list[tuple[list[str], asyncio.Future]]:
        loop = asyncio.get_running_loop()
        first, self._carry = self._carry, None
        items = [first if first is not None else await self._queue.get()]
        size = len(items[0][0])
        deadline = loop.time() + self.window
        while size < self.max_batch:
            if self._queue.empty():
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), left)
                except asyncio.TimeoutError:
                    break
            else:
                item = self._queue.get_nowait()
            if size + len(item[0]) > self.max_batch:
                self._carry = item  # it starts the next batch
                break
            items.append(item)
            size += len(item[0])
        return items

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            items = await self._gather()
            distinct = list(dict.fromkeys(t for texts, _ in items for t in texts))
            self._count(items, len(distinct))
            try:
                rows = await loop.run_in_executor(self._executor, self._encode, distinct)
            except Exception as exc:  # noqa: BLE001 - answered per request below
                await self._alone(items, exc)
                continue
            index = {t: i for i, t in enumerate(distinct)}
            for texts, future in items:
                if not future.done():
                    future.set_result(rows[[index[t] for t in texts]])

    async def _alone(self, items: list, exc: Exception) -> None:
        """A batch failed: encode each request by itself, so only a request whose own texts
        fail gets an error, and that error names only its own texts (one client's bad text
        never fails, nor shows itself to, the other requests of its batch)."""
        if len(items) == 1:
            if not items[0][1].done():
                items[0][1].set_exception(exc)
            return
        loop = asyncio.get_running_loop()
        for texts, future in items:
            if future.done():
                continue
            try:
                rows = await loop.run_in_executor(self._executor, self._encode,
                                                  list(dict.fromkeys(texts)))
            except Exception as own:  # noqa: BLE001 - this request's own error
                future.set_exception(own)
                continue
            index = {t: i for i, t in enumerate(dict.fromkeys(texts))}
            future.set_result(rows[[index[t] for t in texts]])

    def _count(self, items: list, distinct: int) -> None:
        s = self.stats
        s.requests += len(items)
        s.batches += 1
        s.texts += sum(len(texts) for texts, _ in items)
        s.encoded += distinct
        s.largest = max(s.largest, len(items))
        s.sizes = (s.sizes + [len(items)])[-1000:]
        if self._on_batch is not None:
            self._on_batch(len(items), distinct)
