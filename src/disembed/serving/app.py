"""The HTTP service (FastAPI + uvicorn): OpenAI-compatible embeddings, similarity, QE, health.

======================  ====================================================================
``POST /v1/embeddings`` OpenAI's request and response: ``input`` (string or list),
                        ``model`` = a served model id (``NAME`` = the meaning part,
                        ``NAME:language``, ``NAME:raw``; the bare view names are accepted),
                        ``encoding_format`` (``float`` or ``base64``: little-endian float32),
                        plus ``language`` (a code, or one per input) for methods that use it
``POST /v1/similarity`` ``{"pairs": [[a, b], ...], "languages": [la, lb]}`` -> cosine of the
                        meaning parts of each pair
``POST /v1/qe``         ``{"pairs": [[source, mt], ...], "languages": [src, tgt]}`` -> the
                        WMT20 QE task's score, cos(meaning(source), meaning(mt))
``POST /embed``         text-embeddings-inference's request and response (:mod:`.tei`); also
                        ``POST /``, TEI's alias
``GET /v1/models``      the served model ids (OpenAI's list)
``GET /info``           model, recipe, parameters, encoder identity, views, limits, batching,
                        threads, with TEI's field names for its limits
``GET /metrics``        Prometheus metrics (:mod:`.metrics`)
``GET /health``         ``{"status": "ok"}`` and nothing else, as TEI (never needs a key)
======================  ====================================================================

Limits, as TEI has them: at most ``max_concurrent_requests`` embedding requests in flight
(beyond, 429 with ``Retry-After``: :mod:`.admission`); batches of at most ``max_batch``
texts and ``max_batch_tokens`` tokens (:mod:`.batching`); texts of at most
``max_input_tokens`` tokens, cut to fit when a request says ``truncate`` (or the server
``auto_truncate``), else refused (:mod:`.tokens`).

Errors are JSON in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``:
400 for malformed input, 401 without the API key (when one is set), 404 for a model not
served here, 413 over the size limits, 503 with the reason when the service's own
resources fail (e.g. a read-only embedding cache). Concurrent requests are micro-batched
(:mod:`.batching`) into one encoder call on a worker thread. ``usage`` counts
whitespace-separated words (the encoders' tokenizers differ). Every request is logged as
one JSON line on the ``disembed.serving.access`` logger; nothing draws progress bars.
"""

# no ``from __future__ import annotations``: FastAPI reads the handlers' annotations
# (``fastapi.Request``) at definition time, and fastapi is imported lazily in create_app.
import asyncio
import base64
import contextlib
import errno
import hmac
import ipaddress
import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..exceptions import ConfigError, require
from ..hardware import current_settings
from ..version import __version__
from .admission import Admission, add_admission
from .batching import MicroBatcher
from .metrics import ServiceMetrics
from .requests import Limits, parse_embeddings, parse_pairs
from .responses import check_writer, finite_float32, json_response, vector_floats
from .service import EmbeddingService, ServiceError
from .tei import TEI_PATHS, add_tei_routes, tei_body
from .tokens import TokenCounter, encode_within_limits

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("disembed.serving.access")

#: the environment variable ``disembed serve`` reads the API key from
API_KEY_ENV = "DISEMBED_API_KEY"
#: paths that answer without the API key (load balancers probe them)
OPEN_PATHS = ("/health",)
#: the routes that embed (the concurrency limit counts requests to these)
VECTOR_PATHS = ("/v1/embeddings", "/v1/similarity", "/v1/qe", *TEI_PATHS)


@dataclass(frozen=True)
class ServeOptions:
    """How the app is served: batching, API key, CORS origins, and TEI's limits (requests in
    flight, tokens per batch and per text, truncation by default)."""

    max_batch: int = 64
    batch_window: float = 0.005  # seconds
    api_key: str | None = None
    cors_origins: tuple[str, ...] = field(default_factory=tuple)
    max_concurrent_requests: int = 64
    max_batch_tokens: int = 16384
    max_input_tokens: int | None = None
    auto_truncate: bool = False
    encode_workers: int = 1  # batches encoded at once (MicroBatcher's workers)


def _error(status: int, message: str, param: str | None = None, headers=None,
           path: str | None = None):
    """The error response: OpenAI's shape, or TEI's on a TEI route (``path``)."""
    from fastapi.responses import JSONResponse

    if path in TEI_PATHS:
        return JSONResponse(tei_body(status, message), status_code=status, headers=headers)
    kind = ("authentication_error" if status == 401 else "invalid_request_error"
            if status < 500 else "server_error")
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": status}}, status_code=status, headers=headers)


def _embedding(vec: np.ndarray, fmt: str) -> Any:
    if fmt == "base64":
        return base64.b64encode(finite_float32(vec).astype("<f4").tobytes()).decode("ascii")
    return vector_floats(vec)


def _usage(counts: list[int]) -> dict[str, int]:
    """OpenAI's ``usage``: the encoder's tokens (words for an encoder without a tokenizer)."""
    return {"prompt_tokens": sum(counts), "total_tokens": sum(counts)}


async def read_json(request, limits: Limits) -> Any:
    """The request body as JSON: ``Content-Type: application/json`` (415 otherwise: a web
    page may send a ``text/plain`` or form body to a local service without asking, never
    a JSON one), read as it arrives and refused (413) as soon as it passes
    ``limits.max_body_bytes`` (with or without a ``Content-Length``; a chunked body is never
    buffered whole), within ``limits.body_timeout`` seconds (408), and parsed (400 for
    invalid or too deeply nested JSON)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise ServiceError(f"the body must be JSON sent with 'Content-Type: application/json'; "
                           f"got {media or 'no Content-Type'!r}", 415)
    size = int(request.headers.get("content-length") or 0)
    if size > limits.max_body_bytes:
        raise ServiceError(f"the body has {size} bytes; at most {limits.max_body_bytes}", 413)
    try:
        raw = await asyncio.wait_for(_read_body(request, limits.max_body_bytes),
                                     limits.body_timeout)
    except asyncio.TimeoutError:
        raise ServiceError(f"the request body did not arrive within {limits.body_timeout:g} s; "
                           "send it at once", 408) from None
    try:
        return json.loads(raw)
    except RecursionError:
        raise ServiceError("the body's JSON is nested too deeply; send the documented "
                           "request shape") from None
    except ValueError as exc:
        raise ServiceError(f"the body is not valid JSON: {exc}") from None


async def _read_body(request, limit: int) -> bytes:
    """The body, chunk by chunk, stopped (413) as soon as it passes ``limit`` bytes."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServiceError(f"the body has more than {limit} bytes; at most {limit}", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def _paired(request, names, service: EmbeddingService, batcher: MicroBatcher,
                  limits: Limits, counter: TokenCounter, truncate: bool):
    """Both sides of the pairs in one micro-batched encode, then the cosines of their views."""
    req = parse_pairs(await read_json(request, limits), service, limits, names=names)
    request.state.inputs = len(req.a)
    seen, counts, raw = await encode_within_limits(batcher, counter, req.a + req.b, truncate,
                                                   "pairs")
    n = len(req.a)
    return req, service.cosines(seen[:n], seen[n:], raw[:n], raw[n:], req.a_languages,
                                req.b_languages, req.view), counts


def _gauges(service: EmbeddingService):
    def read() -> dict[str, tuple[str, str, float]]:
        stats = getattr(service.encoder, "stats", None)
        out = {"disembed_encoder_calls_total": ("counter", "Calls into the encoder.",
                                                service.counter.calls)}
        if stats is not None:  # the embedding cache (absent with --no-cache)
            out["disembed_cache_lookups_total"] = (
                "counter", "Texts looked up in the embedding cache.", stats.requested)
            out["disembed_cache_hits_total"] = (
                "counter", "Texts found in the embedding cache (not encoded).",
                stats.requested - stats.encoded)
        return out
    return read


def _authorised(request, api_key: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    given = token.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "")
    return bool(given) and hmac.compare_digest(given.encode(), api_key.encode())


def _add_middleware(app, options: ServeOptions, metrics: ServiceMetrics) -> None:
    """Access log + metrics + API key (inner), CORS (outermost, so errors carry its headers)."""
    app.add_middleware(_Access, options=options, metrics=metrics,
                       routes=frozenset(r.path for r in app.routes))
    if options.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(options.cors_origins),
                           allow_methods=["GET", "POST", "OPTIONS"],
                           allow_headers=["authorization", "content-type", "x-api-key"])


class _Access:
    """The access log line, the request metrics and the API key check, as a plain ASGI
    middleware (Starlette's ``@app.middleware`` runs every request through a task and two
    memory streams: milliseconds a request on a busy core)."""

    def __init__(self, app, options: ServeOptions, metrics: ServiceMetrics,
                 routes: frozenset) -> None:
        self.app, self.options, self.metrics, self.routes = app, options, metrics, routes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        t0, status = time.perf_counter(), 500
        request = Request(scope)

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        path, key = scope["path"], self.options.api_key
        try:
            if (key and path not in OPEN_PATHS and scope["method"] != "OPTIONS"
                    and not _authorised(request, key)):
                await _error(401, "this service needs an API key: send 'Authorization: Bearer "
                             "KEY' (the key given to 'disembed serve --api-key' or "
                             f"${API_KEY_ENV})", headers={"WWW-Authenticate": "Bearer"})(
                                 scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        finally:
            self._record(scope, path, status, time.perf_counter() - t0)

    def _record(self, scope, path: str, status: int, seconds: float) -> None:
        inputs = int((scope.get("state") or {}).get("inputs", 0) or 0)
        self.metrics.request(path if path in self.routes else "other", status, seconds, inputs)
        if not access_logger.isEnabledFor(logging.INFO):
            return
        client = scope.get("client")
        access_logger.info(json.dumps({
            "method": scope["method"], "path": path, "status": status,
            "ms": round(1000 * seconds, 2), "inputs": inputs,
            "client": client[0] if client else None}))


def _options(options: ServeOptions | None, max_batch: int | None,
             batch_window: float | None) -> ServeOptions:
    """``options``, with the older ``max_batch`` / ``batch_window`` keywords applied."""
    options = options or ServeOptions()
    return replace(options, max_batch=options.max_batch if max_batch is None else max_batch,
                   batch_window=options.batch_window if batch_window is None else batch_window)


def service_info(service: EmbeddingService, limits: Limits, options: ServeOptions,
                 started: int) -> dict[str, Any]:
    """``GET /info``: what is served and how."""
    model = service.model
    return {"model_id": service.name, "model_ids": list(service.model_ids),
            "method": model.name, "recipe": model.method,
            "params": json.loads(json.dumps(model.get_params(), default=str)),
            "languages": model.known_languages(),
            "encoder": service.encoder.name,
            "encoder_identity": service.encoder.identity.to_dict(),
            "dim": service.encoder.dim, "views": service.views,
            "needs_language": service.needs_language, "limits": asdict(limits),
            "max_batch": options.max_batch, "batch_window_ms": 1000 * options.batch_window,
            "encode_workers": options.encode_workers,
            "auth": bool(options.api_key), "cors_origins": list(options.cors_origins),
            "version": __version__, "started": started,
            # text-embeddings-inference's names for its limits
            "model_dtype": dict(service.encoder.identity.extra).get(
                "dtype", "float32"),
            "max_concurrent_requests": options.max_concurrent_requests,
            "max_batch_tokens": options.max_batch_tokens,
            "max_batch_requests": options.max_batch,
            "max_client_batch_size": limits.max_inputs,
            "max_input_length": options.max_input_tokens, "auto_truncate": options.auto_truncate}


def create_app(service: EmbeddingService, *, limits: Limits | None = None,
               max_batch: int | None = None, batch_window: float | None = None,
               options: ServeOptions | None = None):
    """The FastAPI application serving ``service`` (see the module docstring)."""
    fastapi = require("fastapi", "serve", "disembed serve")
    check_writer()
    limits = limits or Limits()
    if service.name in ("meaning", "language", "raw"):
        logger.warning("the served model id %r is also a view name: requests for %r get this "
                       "model's meaning part (its other views: %s)", service.name,
                       service.name, ", ".join(i for i in service.model_ids if i != service.name))
    options = _options(options, max_batch, batch_window)
    metrics = ServiceMetrics(_gauges(service))
    batcher = MicroBatcher(service.encode, max_batch=options.max_batch,
                           window=options.batch_window, on_batch=metrics.batch,
                           max_batch_tokens=options.max_batch_tokens,
                           workers=options.encode_workers)
    counter = TokenCounter(service.encoder, options.max_input_tokens)
    admission = Admission(options.max_concurrent_requests)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await batcher.start()
        yield
        await batcher.stop()
        close = getattr(service.encoder, "close", None)  # the cache writes what it kept
        if close is not None:
            await asyncio.get_running_loop().run_in_executor(None, close)

    app = fastapi.FastAPI(title="disembed", version=__version__, lifespan=lifespan,
                          description="Language-agnostic meaning embeddings "
                                      f"({service.model.name} on {service.encoder.name}).")
    app.state.service, app.state.batcher, app.state.limits = service, batcher, limits
    app.state.metrics, app.state.options = metrics, options
    app.state.admission, app.state.tokens = admission, counter
    _add_error_handlers(app)
    _add_vector_routes(app, fastapi.Request, service, batcher, limits, counter, options)
    add_tei_routes(app, fastapi.Request, service, batcher, limits, counter,
                   options.auto_truncate, read_json)
    _add_info_routes(app, service, batcher, limits, options, metrics)
    add_admission(app, admission, VECTOR_PATHS, _refuse)
    _add_middleware(app, options, metrics)
    return app


def _refuse(path: str, message: str, retry_after: int):
    """429 in the route's error shape, with ``Retry-After``."""
    return _error(429, message, headers={"Retry-After": str(retry_after)}, path=path)


def _add_error_handlers(app) -> None:
    """A :class:`ServiceError` answers with its status, an unknown path (404) or method (405)
    in the same OpenAI error shape; anything else is a logged 500."""
    from starlette.exceptions import HTTPException

    @app.exception_handler(ServiceError)
    async def service_error(request, exc: ServiceError):
        return _error(exc.status, exc.message, exc.param, path=request.url.path)

    @app.exception_handler(HTTPException)
    async def http_error(request, exc: HTTPException):
        path = request.url.path
        message = {404: f"no such path {path}; this service answers POST /v1/embeddings, "
                        "/v1/similarity, /v1/qe, /embed (TEI) and GET /v1/models, /info, "
                        "/metrics, /health",
                   405: f"{path} does not take {request.method}; allowed: "
                        f"{(exc.headers or {}).get('Allow', 'see GET /info')}"}
        return _error(exc.status_code, message.get(exc.status_code, str(exc.detail)),
                      headers=exc.headers, path=path)

    @app.exception_handler(Exception)
    async def server_error(request, exc: Exception):
        logger.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")


def _add_vector_routes(app, Request, service: EmbeddingService, batcher: MicroBatcher,
                       limits: Limits, counter: TokenCounter, options: ServeOptions) -> None:
    """``/v1/embeddings``, ``/v1/similarity`` and ``/v1/qe``."""
    from . import schemas  # pydantic comes with the [serve] extra's fastapi

    @app.post("/v1/embeddings", openapi_extra=schemas.request_body(schemas.EmbeddingsBody),
              responses={200: {"model": schemas.EmbeddingsResponse}, **schemas.ERRORS})
    async def embeddings(request: Request):
        req = parse_embeddings(await read_json(request, limits), service, limits)
        request.state.inputs = len(req.texts)
        truncate = options.auto_truncate if req.truncate is None else req.truncate
        seen, counts, raw = await encode_within_limits(batcher, counter, req.texts, truncate,
                                                       "input")
        out = service.text_view(seen, raw, req.view, req.languages)
        data = [{"object": "embedding", "index": i,
                 "embedding": _embedding(v, req.encoding_format)}
                for i, v in enumerate(out.vectors)]
        if service.needs_language and req.view != "raw":  # which language each text counted as
            for item, code, p, guessed in zip(data, out.languages, out.probabilities,
                                              out.predicted, strict=True):
                item.update(language=code, language_probability=p, language_predicted=guessed)
        return json_response({"object": "list", "model": req.model, "usage": _usage(counts),
                      "data": data})

    async def paired(request, names):
        return await _paired(request, names, service, batcher, limits, counter,
                             options.auto_truncate)

    @app.post("/v1/similarity", openapi_extra=schemas.request_body(schemas.PairsBody),
              responses={200: {"model": schemas.SimilarityResponse}, **schemas.ERRORS})
    async def similarity(request: Request):
        req, cos, counts = await paired(request, ("text1", "text2"))
        return json_response({"object": "list", "model": req.model, "usage": _usage(counts),
                      "data": [{"object": "similarity", "index": i, "similarity": float(c)}
                               for i, c in enumerate(cos)]})

    @app.post("/v1/qe", openapi_extra=schemas.request_body(schemas.PairsBody),
              responses={200: {"model": schemas.QEResponse}, **schemas.ERRORS})
    async def quality_estimation(request: Request):
        req, cos, counts = await paired(request, ("source", "translation"))
        return json_response({"object": "list", "model": req.model,
                      "metric": "cosine(source, translation)", "usage": _usage(counts),
                      "data": [{"object": "qe_score", "index": i, "score": float(c)}
                               for i, c in enumerate(cos)]})


def _add_info_routes(app, service: EmbeddingService, batcher: MicroBatcher, limits: Limits,
                     options: ServeOptions, metrics: ServiceMetrics) -> None:
    """``/v1/models``, ``/info``, ``/metrics`` and ``/health``."""
    from fastapi.responses import PlainTextResponse

    from . import schemas  # pydantic comes with the [serve] extra's fastapi

    started = int(time.time())

    @app.get("/v1/models", response_model=schemas.ModelList)
    async def models():
        return {"object": "list", "data": [
            {"id": mid, "object": "model", "created": started, "owned_by": "disembed",
             "view": view} for mid, view in service.model_ids.items()]}

    @app.get("/info")
    async def info():
        s, threads = batcher.stats, current_settings()
        return {**service_info(service, limits, options, started),
                "batching": {"requests": s.requests, "batches": s.batches, "texts": s.texts,
                             "encoded": s.encoded, "largest_batch": s.largest,
                             "largest_batch_tokens": s.largest_tokens,
                             "encoder_calls": service.counter.calls,
                             "encode_seconds": round(s.encode_seconds, 6)},
                "admission": {"in_flight": app.state.admission.active,
                              "peak": app.state.admission.peak,
                              "rejected": app.state.admission.rejected},
                "token_unit": app.state.tokens.unit,
                "threads": threads.to_dict() if threads else None}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus():
        return PlainTextResponse(metrics.render(),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/health")
    async def health():
        return {"status": "ok"}  # TEI's: alive; configuration and counters are in /info


def api_key_from_env() -> str | None:
    """The API key in ``$DISEMBED_API_KEY``, or None when unset or empty."""
    return os.environ.get(API_KEY_ENV) or None


def bind(host: str = "127.0.0.1", port: int = 8000) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0: any free one), taken *before* the
    model loads: a port in use is a clear error at once, not after minutes of loading, and
    no other process can take the port in between. Raises
    :class:`~disembed.exceptions.ConfigError`."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: not an address of this machine ({exc.strerror}); "
                          "use e.g. 127.0.0.1 or 0.0.0.0") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = ("is in use (another service, or a disembed serve still running?); choose "
               "another --port or stop that process" if exc.errno == errno.EADDRINUSE else
               f"cannot be bound: {exc.strerror}")
        raise ConfigError(f"port {port} on {host} {why}") from None
    return sock


def warn_if_exposed(host: str, api_key: str | None) -> None:
    """A warning when the service listens beyond this machine without an API key."""
    try:
        loopback = all(ipaddress.ip_address(info[4][0]).is_loopback for info in
                       socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except (socket.gaierror, ValueError):
        loopback = False
    if not loopback and not api_key:
        logger.warning("serving on %s without an API key: anyone who can reach this machine "
                       "can use the service (and its CPU). Set $%s (or --api-key), or bind "
                       "127.0.0.1", host, API_KEY_ENV)


def run_server(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
               sock: socket.socket | None = None) -> None:
    """Serve ``app`` with uvicorn until interrupted, on ``sock`` when given (from
    :func:`bind`), else on ``host:port`` (uvicorn's own access log is off: the app logs one
    JSON line per request on ``disembed.serving.access``)."""
    uvicorn = require("uvicorn", "serve", "disembed serve")
    if sock is None:
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
        return
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=sock.getsockname()[1],
                                           log_level=log_level, access_log=False))
    server.run(sockets=[sock])


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
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
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
