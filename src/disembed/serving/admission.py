"""A limit on the requests the service works on at once (TEI's ``--max-concurrent-requests``).

A request to an embedding route enters if fewer than ``limit`` are in flight; otherwise it
is answered at once with 429 and a ``Retry-After`` header, so that an overloaded service
tells its clients to back off instead of queueing them for seconds. ``Retry-After`` is the
recent time a request took (an exponential average, whole seconds, at least 1).

The event loop is single-threaded, so the counters need no lock.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass
class Admission:
    """Counts requests in flight; see the module docstring."""

    limit: int
    active: int = 0
    admitted: int = 0
    rejected: int = 0
    finished: int = 0
    peak: int = 0
    #: exponential average of the seconds an admitted request took
    seconds: float = 0.0
    weight: float = 0.2

    def __post_init__(self) -> None:
        if int(self.limit) < 1:
            raise ValueError(f"the concurrency limit must be >= 1; got {self.limit}")

    def enter(self) -> bool:
        """Admit one request (``True``), or refuse it when ``limit`` are in flight."""
        if self.active >= self.limit:
            self.rejected += 1
            return False
        self.active += 1
        self.admitted += 1
        self.peak = max(self.peak, self.active)
        return True

    def leave(self, seconds: float) -> None:
        self.active -= 1
        self.finished += 1
        self.seconds = seconds if self.finished == 1 else (
            (1 - self.weight) * self.seconds + self.weight * seconds)

    def retry_after(self) -> int:
        """Seconds a refused client should wait (the ``Retry-After`` header)."""
        return max(1, math.ceil(self.seconds))


def add_admission(app, admission: Admission, paths: tuple[str, ...], refuse) -> None:
    """Keep at most ``admission.limit`` requests to ``paths`` in flight (a plain ASGI
    middleware: no per-request task or stream of its own); ``refuse(path, message,
    retry_after)`` builds the 429 response (its route's error shape)."""
    app.add_middleware(_Admit, admission=admission, paths=frozenset(paths), refuse=refuse)


class _Admit:
    def __init__(self, app, admission: Admission, paths: frozenset, refuse) -> None:
        self.app, self.admission, self.paths, self.refuse = app, admission, paths, refuse

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or scope.get("method") != "POST" or path not in self.paths:
            await self.app(scope, receive, send)
            return
        gate = self.admission
        if not gate.enter():
            wait = gate.retry_after()
            response = self.refuse(path, f"the service is busy: {gate.limit} requests are in "
                                   "flight, its limit (--max-concurrent-requests); retry in "
                                   f"{wait} s", wait)
            await response(scope, receive, send)
            return
        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            gate.leave(time.perf_counter() - t0)
