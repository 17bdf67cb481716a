"""``disembed serve``: an HTTP service for a trained model (or a bare encoder).

OpenAI-compatible ``POST /v1/embeddings`` (``model`` = a served model id from
``GET /v1/models``: NAME for the meaning part, NAME:language, NAME:raw; ``encoding_format``
float or base64; ``language`` optional), ``POST /v1/similarity`` and ``POST /v1/qe``
(cosine of the meaning parts of pairs), text-embeddings-inference's ``POST /embed``
(TEI clients switch by URL), ``GET /info``, Prometheus ``GET /metrics`` and a minimal
``GET /health``. Concurrent requests are micro-batched into one encoder call (at most
``--max-batch`` texts and ``--max-batch-tokens`` tokens); beyond
``--max-concurrent-requests`` a request gets 429 with Retry-After; the embedding cache
sits behind it. Every flag has a ``DISEMBED_*`` environment variable. With ``--api-key``
(or $DISEMBED_API_KEY) every endpoint but /health needs ``Authorization: Bearer KEY``. One
JSON access-log line per request. Needs ``pip install "disembed[serve]"``.

    disembed serve --model models/seed-e5 --port 8000
    curl -s localhost:8000/v1/embeddings -H 'content-type: application/json' \\
         -d '{"input": ["Guten Morgen!"], "model": "seed-e5"}'
"""

from __future__ import annotations

import argparse
import os

from ..hardware import configure_threads, leave_torch_to_workers, physical_cores
from ..serving.app import (
    API_KEY_ENV,
    ServeOptions,
    api_key_from_env,
    bind,
    check_api_key,
    create_app,
    run_server,
    warn_if_exposed,
)
from ..serving.loading import load_service
from ..serving.requests import Limits
from .common import add_common, csv_list, finite_float, non_negative_int, positive_int
from .env import document
from .flags import examples


def port(text: str) -> int:
    """A TCP port, 0-65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 0 to 65535, got {text!r}")
    return value


def input_tokens(text: str) -> int:
    """A per-text token limit: at least 16 (the prefix and special tokens take some)."""
    value = positive_int(text)
    if value < 16:
        raise argparse.ArgumentTypeError(f"expected at least 16 tokens, got {text!r}")
    return value


def window_ms(text: str) -> float:
    """A batching window in milliseconds, 0-10000."""
    value = finite_float(text)
    if not 0 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"expected milliseconds from 0 to 10000, got {text!r}")
    return value


def add_parser(verbs) -> None:
    p = verbs.add_parser("serve", help="serve embeddings over HTTP (OpenAI-compatible)",
                         description=__doc__, epilog=examples(
                             "disembed serve --model models/seed-e5 --port 8000"))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a directory written by 'disembed train' (its encoder is "
                                       "rebuilt from the saved identity; default: none, with "
                                       "--encoder)")
    which.add_argument("--encoder", help="serve a bare encoder spec, meaning = raw embedding "
                                         "(default: none, with --model)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=8000, help="TCP port (default 8000)")
    p.add_argument("--max-batch", type=positive_int, default=64,
                   help="most texts per encoder call (default 64)")
    p.add_argument("--batch-window-ms", type=window_ms, default=5.0,
                   help="how long to gather concurrent requests into one batch (default 5)")
    p.add_argument("--encode-workers", type=positive_int, default=1,
                   help="batches encoded at once, each on its own thread with cores/N torch "
                        "threads: more texts a second from many small requests where one "
                        "call's threads scale poorly (default 1)")
    p.add_argument("--small-batch", type=non_negative_int, default=0, metavar="TEXTS",
                   help="an encoder call of at most this many texts runs on one torch thread "
                        "fewer, leaving a core to the event loop (default 0: never)")
    p.add_argument("--max-inputs", type=positive_int, default=256,
                   help="texts or pairs per request (default 256)")
    p.add_argument("--max-concurrent-requests", type=positive_int, default=64,
                   help="embedding requests in flight at once; beyond, 429 with Retry-After "
                        "(default 64)")
    p.add_argument("--max-batch-tokens", type=positive_int, default=16384,
                   help="tokens per encoder call, all requests of a batch together (words for "
                        "an encoder without a tokenizer; default 16384)")
    p.add_argument("--max-input-tokens", type=input_tokens, default=None,
                   help="tokens per text; a longer text is refused unless the request says "
                        "truncate (default: no limit, a long text is embedded whole as the "
                        "library does; truncate then cuts at the encoder's window)")
    p.add_argument("--auto-truncate", action="store_true",
                   help="cut long texts to fit unless a request says truncate: false")
    p.add_argument("--max-chars", type=positive_int, default=8192,
                   help="characters per text (default 8192)")
    p.add_argument("--served-model-name", default=None, metavar="NAME",
                   help="the model id clients send as 'model' (default: the model folder's "
                        "name, or the encoder spec)")
    p.add_argument("--api-key", default=None,
                   help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV} if set; "
                        "prefer the variable: a command line is visible to other users)")
    p.add_argument("--cors-origins", type=csv_list, default=None, metavar="ORIGINS",
                   help="comma-separated origins allowed to call from a browser (default: "
                        "none; '*' for any)")
    p.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    add_common(p)
    document(p)  # every flag also as DISEMBED_<FLAG>
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    os.environ["DISEMBED_PROGRESS"] = "0"  # a service never draws bars: its log is for lines
    api_key = check_api_key(args.api_key or None) or api_key_from_env()  # before the load
    sock = bind(args.host, args.port)  # a port in use: an error now, not after the load
    warn_if_exposed(args.host, api_key)
    leave_torch_to_workers()  # before the load: only the encode workers start OpenMP teams
    service = load_service(args.model, args.encoder, cache_dir=args.cache_dir,
                           use_cache=not args.no_cache)
    if args.served_model_name:
        service.name = args.served_model_name
    service.small_batch = args.small_batch
    limits = Limits(max_inputs=args.max_inputs, max_chars=args.max_chars,
                    max_total_chars=max(Limits.max_total_chars, args.max_chars))
    options = ServeOptions(max_batch=args.max_batch, batch_window=args.batch_window_ms / 1000,
                           api_key=api_key,
                           cors_origins=tuple(args.cors_origins or ()),
                           max_concurrent_requests=args.max_concurrent_requests,
                           max_batch_tokens=args.max_batch_tokens,
                           max_input_tokens=args.max_input_tokens,
                           auto_truncate=args.auto_truncate,
                           encode_workers=args.encode_workers)
    if args.encode_workers > 1:  # each worker's calls get their share of the cores
        configure_threads(max(1, physical_cores() // args.encode_workers))
    app = create_app(service, limits=limits, options=options)
    run_server(app, args.host, args.port, "warning" if args.quiet else "info", sock=sock)
    return 0
