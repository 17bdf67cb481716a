"""The HTTP service (FastAPI + uvicorn): OpenAI-compatible embeddings, similarity, QE, health.

======================  ====================================================================
``POST /v1/embeddings`` OpenAI's request and response: ``input`` (string or list),
                        ``model`` = a served model id (``NAME`` = the meaning part,
                        ``NAME:language``, ``NAME:raw``; the bare view names are accepted),
                        ``encoding_format`` (``float`` or ``base64``: little-endian float32),
                        plus ``language`` (a code, or one per input) for methods that use it,
                        ``normalize`` (default true: unit vectors, as OpenAI's; false: the
                        view as the model computes it)
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
``GET /health``         ``{"status": "ok"}`` and nothing else, as TEI (never needs a key; also
                        ``HEAD``)
======================  ====================================================================

The routes are module-level functions of the request (:mod:`.routes`, :mod:`.tei`); this
module builds the app, its middleware and its error handlers, and runs the server.

Limits, as TEI has them: at most ``max_concurrent_requests`` embedding requests in flight,
each admitted once its body has arrived (beyond, 429 with ``Retry-After``:
:mod:`.admission`; bodies are read within the limits of :mod:`.intake`); batches of at
most ``max_batch`` texts and ``max_batch_tokens`` tokens (:mod:`.batching`); texts of at
most ``max_input_tokens`` tokens, cut to fit when a request says ``truncate`` (or the server
``auto_truncate``), else refused (:mod:`.tokens`).

Errors are JSON in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``:
400 for malformed input, 401 without the API key (when one is set), 404 for a model not
served here, 413 over the size limits, 503 with the reason when the service's own
resources fail (e.g. a read-only embedding cache); a client that leaves before it is
answered is counted as 499, with no traceback. Concurrent requests are micro-batched
(:mod:`.batching`) into one encoder call on a worker thread. ``usage`` counts
whitespace-separated words (the encoders' tokenizers differ). Every request is logged as
one JSON line on the ``disembed.serving.access`` logger; nothing draws progress bars.
"""

# no ``from __future__ import annotations``: FastAPI reads the handlers' annotations
# (``fastapi.Request``) at definition time, and fastapi is imported lazily in create_app.
import asyncio
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
from dataclasses import dataclass, field, replace

from ..exceptions import ConfigError, require
from ..version import __version__
from .admission import Admission, add_admission
from .batching import MicroBatcher
from .intake import BodyReads
from .metrics import ServiceMetrics
from .requests import Limits
from .responses import TEI_PATHS, check_writer, error_body
from .service import EmbeddingService, ServiceError
from .tokens import TokenCounter

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("disembed.serving.access")

#: the environment variable ``disembed serve`` reads the API key from
API_KEY_ENV = "DISEMBED_API_KEY"
#: paths that answer without the API key (load balancers probe them)
OPEN_PATHS = ("/health",)
#: the status counted (metrics, access log) when a client leaves before it is answered
#: (nginx's "client closed request"; never sent: nobody is there)
CLIENT_GONE = 499
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "api_key", check_api_key(self.api_key))


def check_api_key(key: str | None) -> str | None:
    """``key`` as clients send it: surrounding whitespace (a trailing newline from ``$(cat
    keyfile)``, say) is stripped with a warning, since a header value never carries it; a
    key HTTP cannot carry (a character beyond Latin-1) or a blank one raises
    :class:`~disembed.exceptions.ConfigError`. ``None`` stays ``None`` (no key)."""
    if key is None:
        return None
    stripped = key.strip()
    if not stripped:
        raise ConfigError("the API key is empty or whitespace only; give a key of visible "
                          f"characters (--api-key or ${API_KEY_ENV}), or none to serve "
                          "without one")
    if stripped != key:
        logger.warning("the API key had %d whitespace character(s) around it (a trailing "
                       "newline?); they were stripped: clients send the key without them",
                       len(key) - len(stripped))
    bad = next((i for i, ch in enumerate(stripped) if ord(ch) > 0xFF or ord(ch) < 0x20
                or ch == "\x7f"), None)
    if bad is not None:
        raise ConfigError(f"the API key holds U+{ord(stripped[bad]):04X} at character {bad}: "
                          "an HTTP header carries only Latin-1 text without control "
                          "characters, so no client could send this key; choose a key of "
                          "ASCII letters, digits and punctuation")
    return stripped


def _error(status: int, message: str, param: str | None = None, headers=None,
           path: str | None = None):
    """The error response: OpenAI's shape, or TEI's on a TEI route (``path``)."""
    from fastapi.responses import JSONResponse

    return JSONResponse(error_body(status, message, param, path), status_code=status,
                        headers=headers)


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

        t0, status = time.perf_counter(), None
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
        except BaseException:
            status = status or 500
            raise
        finally:  # no response and no error: the client left first
            self._record(scope, path, status or CLIENT_GONE, time.perf_counter() - t0)

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
    app.state.started = int(time.time())
    app.state.body_reads = BodyReads(limits.max_client_body_reads)
    from .routes import add_routes  # fastapi comes with the [serve] extra

    _add_error_handlers(app)
    add_routes(app)
    add_admission(app, admission, app.state.body_reads, VECTOR_PATHS, _refuse, limits)
    _add_middleware(app, options, metrics)
    return app


def _refuse(path: str, status: int, message: str, headers: dict | None):
    """An error response before the route runs (408, 413, 429), in the route's shape."""
    return _error(status, message, headers=headers, path=path)


def _add_error_handlers(app) -> None:
    """A :class:`ServiceError` answers with its status, an unknown path (404) or method (405)
    in the same OpenAI error shape; anything else is a logged 500."""
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect

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

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request, exc: ClientDisconnect):
        logger.info("a client left %s %s before its body arrived", request.method,
                    request.url.path)  # no traceback: nobody is there to answer
        return _error(CLIENT_GONE, "the client closed the connection", path=request.url.path)

    @app.exception_handler(Exception)
    async def server_error(request, exc: Exception):
        logger.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")


def api_key_from_env() -> str | None:
    """The API key in ``$DISEMBED_API_KEY``, or None when unset or empty (checked and
    stripped by :func:`check_api_key`)."""
    return check_api_key(os.environ.get(API_KEY_ENV) or None)


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
    :func:`bind`; the address it is bound to is logged, a warning when ``port`` was 0), else
    on ``host:port`` (uvicorn's own access log is off: the app logs one JSON line per request
    on ``disembed.serving.access``)."""
    uvicorn = require("uvicorn", "serve", "disembed serve")
    if sock is None:
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
        return
    bound = sock.getsockname()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=bound[1],
                                           log_level=log_level, access_log=False))
    # uvicorn names no address when handed a socket; --port 0 must learn the one it got
    logger.log(logging.WARNING if port == 0 else logging.INFO, "serving on %s",
               served_url(bound))
    server.run(sockets=[sock])


def served_url(address: tuple) -> str:
    """``http://HOST:PORT`` of a bound socket's address (an IPv6 host in brackets)."""
    host, port = address[0], address[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


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
