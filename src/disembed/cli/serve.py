"""``disembed serve``: an HTTP service for a trained model (or a bare encoder).

OpenAI-compatible ``POST /v1/embeddings`` (``model`` names the view: meaning, language,
raw; ``encoding_format`` float or base64; ``language`` for methods that need it),
``POST /v1/similarity`` and ``POST /v1/qe`` (cosine of the meaning parts of pairs) and
``GET /health``. Concurrent requests are micro-batched into one encoder call; the
embedding cache sits behind it. Needs ``pip install "disembed[serve]"``.

    disembed serve --model models/seed-e5 --port 8000
    curl -s localhost:8000/v1/embeddings -H 'content-type: application/json' \\
         -d '{"input": ["Guten Morgen!"], "model": "meaning"}'
"""

from __future__ import annotations

import argparse

from ..serving.app import create_app, run_server
from ..serving.loading import load_service
from ..serving.requests import Limits
from .common import add_common


def add_parser(verbs) -> None:
    p = verbs.add_parser("serve", help="serve embeddings over HTTP (OpenAI-compatible)",
                         description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a directory written by 'disembed train' (its encoder is "
                                       "rebuilt from the saved identity)")
    which.add_argument("--encoder", help="serve a bare encoder spec (meaning = raw embedding)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=int, default=64, help="most texts per encoder call")
    p.add_argument("--batch-window-ms", type=float, default=5.0,
                   help="how long to gather concurrent requests into one batch (default 5)")
    p.add_argument("--max-inputs", type=int, default=256, help="texts or pairs per request")
    p.add_argument("--max-chars", type=int, default=8192, help="characters per text")
    p.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    service = load_service(args.model, args.encoder, cache_dir=args.cache_dir,
                           use_cache=not args.no_cache)
    limits = Limits(max_inputs=args.max_inputs, max_chars=args.max_chars)
    app = create_app(service, limits=limits, max_batch=args.max_batch,
                     batch_window=args.batch_window_ms / 1000)
    run_server(app, args.host, args.port, "warning" if args.quiet else "info")
    return 0
