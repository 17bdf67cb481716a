"""Micro-batching: concurrent requests share one encoder call.

Each request puts its texts on a queue and awaits a future. A worker thread (``workers`` of
them, default one) takes the waiting requests as soon as it is free: the first one, then
every other that arrives up to ``window`` seconds after that first one, until ``max_batch``
texts or ``max_batch_tokens`` tokens are gathered (a batch is counted in tokens too, as
TEI's ``--max-batch-tokens``: 64 long texts cost many times 64 short ones), or as many
requests as are expected: the worker's last batch has just been answered, so its clients
come back, together with the backlog that arrived while it encoded. The window then stops
waiting for requests that are not coming (8 clients x 1 text on 2 cores: each batch of 8
waited ~4 ms past its last arrival, a tenth of its cycle), and a backlog waits up to one
window more for the clients just answered, so that a closed loop of clients keeps one batch
instead of two halves that alternate (on 2 cores, two halves of 4 served ~140 sentences/s
against ~220 for one batch of 8). It encodes the distinct texts of all of them in one call
and hands each request its rows through the event loop, then takes the next batch itself:
requests that arrive while a batch is encoding form the next one (with the clients just
answered, as above), and the encoder never waits for the event loop to notice that it is
free (on a busy machine every hand-over between threads costs a time slice). A request
larger than either limit is encoded alone. When a batch fails, each of its requests is
encoded again by itself, so an error reaches only the request whose own texts caused it (and
shows it only those texts).

With ``workers`` > 1, that many batches encode at once, each on its own thread (the service
then gives torch ``cores // workers`` threads): small batches use two cores badly through one
call's intra-op threads (a batch of four short sentences on e5-small takes ~20 ms on two
threads and ~26 ms on one), so two single-threaded calls side by side finish more texts a
second. A text's vector does not depend on the batch it lands in, so nothing else changes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
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
    largest_tokens: int = 0  # most tokens in one batch
    #: wall seconds inside encoder calls, summed over the workers (a failed batch's
    #: retries included): over an interval, divided by its length, how busy the encoder was
    encode_seconds: float = 0.0
    sizes: list[int] = field(default_factory=list, repr=False)  # requests per batch (last 1000)


@dataclass
class _Request:
    texts: list[str]
    future: asyncio.Future
    tokens: int
    arrived: float


class MicroBatcher:
    """Gathers concurrent ``encode`` calls into batches; see the module docstring.

    Args:
        encode: ``texts -> (n, d) float32``, called on the batcher's one worker thread.
        max_batch: most texts per encoder call (a single larger request still goes alone).
        window: seconds to wait for more requests after the first one arrives.
        max_batch_tokens: most tokens per encoder call (each request's tokens are given to
            :meth:`encode`; without them its texts count one token each).
    """

    def __init__(self, encode: Callable[[list[str]], np.ndarray], *, max_batch: int = 64,
                 window: float = 0.005,
                 on_batch: Callable[[int, int], None] | None = None,
                 max_batch_tokens: int | None = None, workers: int = 1) -> None:
        if int(max_batch) < 1 or not window >= 0 or int(workers) < 1 or (
                max_batch_tokens is not None and int(max_batch_tokens) < 1):
            raise ValueError(f"max_batch, max_batch_tokens and workers must be >= 1 and "
                             f"window >= 0; got {max_batch}, {max_batch_tokens}, {workers}, "
                             f"{window}")
        self.workers = int(workers)
        self._encode, self.max_batch, self.window = encode, int(max_batch), float(window)
        self.max_batch_tokens = None if max_batch_tokens is None else int(max_batch_tokens)
        self._on_batch = on_batch  # (requests, distinct texts) of every encoder call
        self.stats = BatchStats()
        self._pending: deque[_Request] = deque()
        self._last_requests: dict[int, int] = {}  # worker thread -> requests in its last batch
        self._ready = threading.Condition()
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._threads: list[threading.Thread] = []
        self._count_lock = threading.Lock()
        self._stopping = False

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, name=f"disembed-encode-{i}",
                                          daemon=True) for i in range(self.workers)]
        for thread in self._threads:
            thread.start()

    async def stop(self) -> None:
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        for thread in self._threads:
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)

    async def encode(self, texts: list[str], tokens: int | None = None) -> np.ndarray:
        """``(len(texts), d) float32`` raw embeddings, encoded together with concurrent calls;
        ``tokens``: what ``texts`` cost against ``max_batch_tokens`` (default: one a text)."""
        if not self._threads:
            raise RuntimeError("MicroBatcher.start() was not awaited")
        future = self._loop.create_future()
        with self._ready:
            self._pending.append(_Request(list(texts), future,
                                          len(texts) if tokens is None else int(tokens),
                                          time.monotonic()))
            self._ready.notify()
        return await future

    # --- the worker thread -----------------------------------------------------------
    def _work(self) -> None:
        while True:
            items = self._take()
            if items is None:
                return
            self._run(items)

    def _fits(self, size: int, tokens: int, item: _Request) -> bool:
        """Whether ``item`` joins a batch of ``size`` texts and ``tokens`` tokens."""
        if size + len(item.texts) > self.max_batch:
            return False
        return self.max_batch_tokens is None or tokens + item.tokens <= self.max_batch_tokens

    def _full(self, size: int, tokens: int) -> bool:
        return size >= self.max_batch or (self.max_batch_tokens is not None
                                          and tokens >= self.max_batch_tokens)

    def _take(self) -> list[_Request] | None:
        """The next batch (module docstring), or ``None`` once stopping."""
        worker = threading.get_ident()
        with self._ready:
            backlog = len(self._pending)  # arrived while this worker encoded its last batch
            while not self._pending and not self._stopping:
                self._ready.wait()
            if self._stopping:
                return None
            first = self._pending.popleft()
            items, size, tokens = [first], len(first.texts), first.tokens
            # this worker's last batch has just been answered: its clients come back, so wait
            # for them as well as the backlog (a closed loop keeps one batch of all its
            # clients instead of two halves that alternate), at most one window from now
            last = self._last_requests.get(worker, 0)
            target = backlog + last
            deadline = (time.monotonic() if backlog else first.arrived) + self.window
            while not self._full(size, tokens):
                if self._pending:
                    if not self._fits(size, tokens, self._pending[0]):
                        break  # it starts the next batch
                    item = self._pending.popleft()
                    items.append(item)
                    size, tokens = size + len(item.texts), tokens + item.tokens
                    continue
                if 0 < target <= len(items):
                    break  # every client expected is in
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping:
                    break
                self._ready.wait(left)
            self._last_requests[worker] = len(items)
            self.stats.largest_tokens = max(self.stats.largest_tokens, tokens)
        return items

    def _run(self, items: list[_Request]) -> None:
        items = [r for r in items if not r.future.done()]  # a client that went away
        if not items:
            return
        distinct = list(dict.fromkeys(t for r in items for t in r.texts))
        self._count(items, len(distinct))
        start = time.perf_counter()
        try:
            rows = self._encode(distinct)
        except Exception as exc:  # noqa: BLE001 - answered per request below
            self._alone(items, exc)
            return
        finally:
            with self._count_lock:
                self.stats.encode_seconds += time.perf_counter() - start
        index = {t: i for i, t in enumerate(distinct)}
        for r in items:
            self._answer(r.future, rows[[index[t] for t in r.texts]])

    def _alone(self, items: list[_Request], exc: Exception) -> None:
        """A batch failed: encode each request by itself, so only a request whose own texts
        fail gets an error, and that error names only its own texts (one client's bad text
        never fails, nor shows itself to, the other requests of its batch)."""
        if len(items) == 1:
            self._answer(items[0].future, exc)
            return
        for r in items:
            own = list(dict.fromkeys(r.texts))
            try:
                rows = self._encode(own)
            except Exception as error:  # noqa: BLE001 - this request's own error
                self._answer(r.future, error)
                continue
            index = {t: i for i, t in enumerate(own)}
            self._answer(r.future, rows[[index[t] for t in r.texts]])

    def _answer(self, future: asyncio.Future, value) -> None:
        """Resolve ``future`` on its event loop (rows, or an exception to raise)."""
        def resolve() -> None:
            if future.done():
                return
            if isinstance(value, BaseException):
                future.set_exception(value)
            else:
                future.set_result(value)

        try:
            self._loop.call_soon_threadsafe(resolve)
        except RuntimeError:  # the loop has closed (the service is shutting down)
            logger.debug("a batch finished after the event loop closed")

    def _count(self, items: list[_Request], distinct: int) -> None:
        s = self.stats
        with self._count_lock:  # workers > 1 count from several threads
            s.requests += len(items)
            s.batches += 1
            s.texts += sum(len(r.texts) for r in items)
            s.encoded += distinct
            s.largest = max(s.largest, len(items))
            s.sizes = (s.sizes + [len(items)])[-1000:]
            if self._on_batch is not None:
                self._on_batch(len(items), distinct)
