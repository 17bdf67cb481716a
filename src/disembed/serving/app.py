"""The HTTP service (FastAPI + uvicorn): OpenAI-compatible embeddings, similarity, QE, health.

======================  ====================================================================
``POST /v1/embeddings`` OpenAI's request and response: ``input`` (string or list),
                        ``model`` = the view (``meaning``, ``language``, ``raw``),
                        ``encoding_format`` (``float`` or ``base64``: little-endian float32),
                        plus ``language`` (a code, or one per input) for methods that need it
``POST /v1/similarity`` ``{"pairs": [[a, b], ...], "languages": [la, lb]}`` -> cosine of the
                        meaning parts of each pair
``POST /v1/qe``         ``{"pairs": [[source, mt], ...], "languages": [src, tgt]}`` -> the
                        WMT20 QE task's score, cos(meaning(source), meaning(mt))
``GET /health``         status, encoder, method, views, batching counters
======================  ====================================================================

Errors are JSON in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``:
400 for malformed input, 413 over the size limits. Concurrent requests are micro-batched
(:mod:`.batching`) into one encoder call on a worker thread. ``usage`` counts
whitespace-separated words (the encoders' tokenizers differ).
"""

# no ``from __future__ import annotations``: FastAPI reads the handlers' annotations
# (``fastapi.Request``) at definition time, and fastapi is imported lazily in create_app.
import base64
import contextlib
import json
import logging
import socket
import threading
import time
from typing import Any

import numpy as np

from ..exceptions import require
from .batching import MicroBatcher
from .requests import Limits, parse_embeddings, parse_pairs
from .service import EmbeddingService, ServiceError

logger = logging.getLogger(__name__)


def _error(status: int, message: str, param: str | None = None):
    from fastapi.responses import JSONResponse

    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": status}}, status_code=status)


def _embedding(vec: np.ndarray, fmt: str) -> Any:
    if fmt == "base64":
        return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")
    return vec.astype(np.float32).tolist()


def _usage(texts: list[str]) -> dict[str, int]:
    words = sum(len(t.split()) for t in texts)
    return {"prompt_tokens": words, "total_tokens": words}


async def read_json(request, limits: Limits) -> Any:
    """The request body as JSON, refused (413) over ``limits.max_body_bytes``."""
    size = int(request.headers.get("content-length") or 0)
    if size > limits.max_body_bytes:
        raise ServiceError(f"the body has {size} bytes; at most {limits.max_body_bytes}", 413)
    raw = await request.body()
    if len(raw) > limits.max_body_bytes:
        raise ServiceError(f"the body has {len(raw)} bytes; at most {limits.max_body_bytes}",
                           413)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ServiceError(f"the body is not valid JSON: {exc}") from None


async def _paired(request, names, service: EmbeddingService, batcher: MicroBatcher,
                  limits: Limits):
    """Both sides of the pairs in one micro-batched encode, then the cosines of their views."""
    req = parse_pairs(await read_json(request, limits), service, limits, names=names)
    raw = await batcher.encode(req.a + req.b)
    n = len(req.a)
    return req, service.cosines(raw[:n], raw[n:], req.a_languages, req.b_languages, req.view)


def create_app(service: EmbeddingService, *, limits: Limits | None = None, max_batch: int = 64,
               batch_window: float = 0.005):
    """The FastAPI application serving ``service`` (see the module docstring)."""
    fastapi = require("fastapi", "serve", "disembed serve")
    limits = limits or Limits()
    batcher = MicroBatcher(service.encode, max_batch=max_batch, window=batch_window)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await batcher.start()
        yield
        await batcher.stop()

    app = fastapi.FastAPI(title="disembed", lifespan=lifespan)
    app.state.service, app.state.batcher, app.state.limits = service, batcher, limits
    _add_error_handlers(app)
    _add_vector_routes(app, fastapi.Request, service, batcher, limits)
    _add_health_route(app, service, batcher, limits)
    return app


def _add_error_handlers(app) -> None:
    """A :class:`ServiceError` answers with its status; anything else is a logged 500."""

    @app.exception_handler(ServiceError)
    async def service_error(request, exc: ServiceError):
        return _error(exc.status, exc.message, exc.param)

    @app.exception_handler(Exception)
    async def server_error(request, exc: Exception):
        logger.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")


def _add_vector_routes(app, Request, service: EmbeddingService, batcher: MicroBatcher,
                       limits: Limits) -> None:
    """``/v1/embeddings``, ``/v1/similarity`` and ``/v1/qe``."""

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        req = parse_embeddings(await read_json(request, limits), service, limits)
        raw = await batcher.encode(req.texts)
        vectors = service.view(raw, req.view, req.languages)
        return {"object": "list", "model": req.view, "usage": _usage(req.texts),
                "data": [{"object": "embedding", "index": i,
                          "embedding": _embedding(v, req.encoding_format)}
                         for i, v in enumerate(vectors)]}

    async def paired(request, names):
        return await _paired(request, names, service, batcher, limits)

    @app.post("/v1/similarity")
    async def similarity(request: Request):
        req, cos = await paired(request, ("text1", "text2"))
        return {"object": "list", "model": req.view, "usage": _usage(req.a + req.b),
                "data": [{"object": "similarity", "index": i, "similarity": float(c)}
                         for i, c in enumerate(cos)]}

    @app.post("/v1/qe")
    async def quality_estimation(request: Request):
        req, cos = await paired(request, ("source", "translation"))
        return {"object": "list", "model": req.view, "metric": "cosine(source, translation)",
                "usage": _usage(req.a + req.b),
                "data": [{"object": "qe_score", "index": i, "score": float(c)}
                         for i, c in enumerate(cos)]}


def _add_health_route(app, service: EmbeddingService, batcher: MicroBatcher,
                      limits: Limits) -> None:
    @app.get("/health")
    async def health():
        s = batcher.stats
        return {"status": "ok", "encoder": service.encoder.name, "dim": service.encoder.dim,
                "method": service.model.name, "model": service.label, "views": service.views,
                "needs_language": service.needs_language,
                "limits": vars(limits),
                "batching": {"requests": s.requests, "batches": s.batches, "texts": s.texts,
                             "encoded": s.encoded, "largest_batch": s.largest,
                             "encoder_calls": service.counter.calls}}


def run_server(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Serve ``app`` with uvicorn until interrupted."""
    uvicorn = require("uvicorn", "serve", "disembed serve")
    uvicorn.run(app, host=host, port=port, log_level=log_level)


class BackgroundServer:
    """``app`` served by uvicorn on a free port of ``host`` in a thread (tests, benchmarks).

    >>> with BackgroundServer(app) as url:                   # doctest: +SKIP
    ...     httpx.get(url + "/health")
    """

    def __init__(self, app, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        uvicorn = require("uvicorn", "serve", "disembed serve")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.url = f"http://{host}:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)
        self.timeout = timeout

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + self.timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(self.timeout)
        self.sock.close()
