"""A limit on the requests the service works on at once (TEI's ``--max-concurrent-requests``).

A request to an embedding route is read first (its body, within the limits of
:mod:`.intake`), and only then enters, if fewer than ``limit`` are in flight; otherwise it
is answered at once with 429 and a ``Retry-After`` header, so that an overloaded service
tells its clients to back off instead of queueing them for seconds. A slot is held only
while the request is worked on: a client still sending its body holds none (issue 48: 64
sockets that sent half a body each locked every other client into 429 for 30 s).
``Retry-After`` is the recent time a request took (an exponential average, whole seconds,
at least 1).

The event loop is single-threaded, so the counters need no lock.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from .intake import BodyReads, ClientGone, receive_body, replay
from .requests import Limits
from .service import ServiceError

logger = logging.getLogger(__name__)


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


def add_admission(app, admission: Admission, reads: BodyReads, paths: tuple[str, ...],
                  refuse, limits: Limits) -> None:
    """Keep at most ``admission.limit`` requests to ``paths`` in flight, each admitted only
    once its body has arrived (a plain ASGI middleware: no per-request task or stream of its
    own); ``refuse(path, status, message, headers)`` builds an error response in its
    route's shape (408, 413 or 429)."""
    app.add_middleware(_Admit, admission=admission, reads=reads, paths=frozenset(paths),
                       refuse=refuse, limits=limits)


class _Admit:
    """Body first (:mod:`.intake`: at most ``limits.max_client_body_reads`` per client
    address, each within the size and time limits), then a slot, then the route, which
    gets the buffered body."""

    def __init__(self, app, admission: Admission, reads: BodyReads, paths: frozenset, refuse,
                 limits: Limits) -> None:
        self.app, self.admission, self.paths, self.refuse = app, admission, paths, refuse
        self.limits, self.reads = limits, reads

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or scope.get("method") != "POST" or path not in self.paths:
            await self.app(scope, receive, send)
            return
        try:
            body = await self._body(scope, receive)
        except ClientGone:  # nothing to answer: the access log counts it as 499
            logger.info("a client left %s before its body arrived", path)
            return
        except ServiceError as exc:
            headers = {"Retry-After": "1"} if exc.status == 429 else None
            await self.refuse(path, exc.status, exc.message, headers)(scope, receive, send)
            return
        gate = self.admission
        if not gate.enter():
            wait = gate.retry_after()
            response = self.refuse(path, 429, f"the service is busy: {gate.limit} requests are "
                                   "in flight, its limit (--max-concurrent-requests); retry "
                                   f"in {wait} s", {"Retry-After": str(wait)})
            await response(scope, receive, send)
            return
        t0 = time.perf_counter()
        try:
            await self.app(scope, replay(body, receive), send)
        finally:
            gate.leave(time.perf_counter() - t0)

    async def _body(self, scope, receive) -> bytes:
        """The whole body, read while this client's reads are within their limit."""
        client = (scope.get("client") or ("?",))[0]
        if not self.reads.enter(client):
            raise ServiceError(f"this client already has {self.reads.limit} request bodies "
                               "arriving, its limit (Limits.max_client_body_reads); send each "
                               "body at once, or fewer requests side by side", 429)
        try:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope.get("headers", ())}
            return await receive_body(receive, headers, self.limits)
        finally:
            self.reads.leave(client)
