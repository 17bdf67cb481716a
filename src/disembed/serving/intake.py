"""A request's body, read before the request may take a place among those in flight.

A body is read as it arrives, refused (413) as soon as it passes ``Limits.max_body_bytes``
(with or without a ``Content-Length``: a chunked body is never buffered whole), and given
``Limits.body_timeout`` seconds to arrive whole (408). :class:`BodyReads` bounds how many
bodies one client address may be sending at once (``Limits.max_client_body_reads``;
beyond, 429), so one slow client cannot hold an unbounded number of reads open.

The admission middleware (:mod:`.admission`) reads the body with :func:`receive_body`
*before* the request takes a concurrency slot, then hands the buffered body on; a slow
sender therefore waits outside the limit instead of locking other clients into 429
(issue 48). :func:`read_json` is what a route calls: the body (already buffered by then)
as JSON.

No web framework is imported here: the routes pass Starlette's request, the middleware
its ASGI ``receive``.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any, AsyncIterator, Awaitable, Callable

from .requests import Limits, short
from .service import ServiceError


class ClientGone(Exception):
    """The client closed its connection before its body arrived (nothing to answer)."""


async def _bounded(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The body, chunk by chunk, stopped (413) as soon as it passes ``limit`` bytes."""
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise ServiceError(f"the body has more than {limit} bytes; at most {limit}", 413)
        parts.append(chunk)
    return b"".join(parts)


async def read_body(chunks: AsyncIterator[bytes], declared: str | None, limits: Limits
                    ) -> bytes:
    """The whole body of ``chunks`` within ``limits`` (413 over the size, at once when
    ``declared``, the ``Content-Length``, says so; 408 when it does not arrive in time)."""
    try:
        size = int(declared or 0)
    except ValueError:
        size = 0  # the server's HTTP parser refuses a malformed Content-Length itself
    if size > limits.max_body_bytes:
        raise ServiceError(f"the body has {size} bytes; at most {limits.max_body_bytes}", 413)
    try:
        return await asyncio.wait_for(_bounded(chunks, limits.max_body_bytes),
                                      limits.body_timeout)
    except asyncio.TimeoutError:
        raise ServiceError(f"the request body did not arrive within {limits.body_timeout:g} s; "
                           "send it at once", 408) from None


async def _messages(receive: Callable[[], Awaitable[dict]]) -> AsyncIterator[bytes]:
    """The body chunks of an ASGI request; :class:`ClientGone` when the client leaves."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def receive_body(receive, headers: dict[str, str], limits: Limits) -> bytes:
    """The whole body of an ASGI request (:func:`read_body`), read from ``receive``."""
    return await read_body(_messages(receive), headers.get("content-length"), limits)


def replay(body: bytes, receive):
    """An ASGI ``receive`` that gives ``body`` whole first, then what ``receive`` gives (a
    disconnect, once the client leaves)."""
    sent = False

    async def again() -> dict:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


class BodyReads:
    """Bodies being read now, per client address, at most ``limit`` each (0: no limit).

    The event loop is single-threaded, so the counters need no lock."""

    def __init__(self, limit: int) -> None:
        if int(limit) < 0:
            raise ValueError(f"max_client_body_reads must be >= 0 (0: no limit); got {limit}")
        self.limit = int(limit)
        self.reading: dict[str, int] = defaultdict(int)
        self.refused = 0

    def enter(self, client: str) -> bool:
        """Start one read for ``client`` (``True``), or refuse it at its limit."""
        if self.limit and self.reading[client] >= self.limit:
            self.refused += 1
            return False
        self.reading[client] += 1
        return True

    def leave(self, client: str) -> None:
        self.reading[client] -= 1
        if self.reading[client] <= 0:
            del self.reading[client]


async def read_json(request, limits: Limits) -> Any:
    """The request body as JSON: ``Content-Type: application/json`` (415 otherwise: a web
    page may send a ``text/plain`` or form body to a local service without asking, never
    a JSON one), read within ``limits`` (:func:`read_body`), and parsed (400 for invalid or
    too deeply nested JSON)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise ServiceError(f"the body must be JSON sent with 'Content-Type: application/json'; "
                           f"got {short(media) if media else 'no Content-Type'}", 415)
    raw = await read_body(request.stream(), request.headers.get("content-length"), limits)
    try:
        return json.loads(raw)
    except RecursionError:
        raise ServiceError("the body's JSON is nested too deeply; send the documented "
                           "request shape") from None
    except ValueError as exc:
        raise ServiceError(f"the body is not valid JSON: {short(str(exc), 200)}") from None

