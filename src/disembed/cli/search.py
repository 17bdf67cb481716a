"""``disembed search QUERIES DATABASE``: the k nearest database sentences of every query."""

from __future__ import annotations

import argparse

from ..mining import search_files
from .common import add_common, add_encoder, encoder_from_args
from .mine import add_input_options, load_model, run_dir


def add_parser(verbs) -> None:
    p = verbs.add_parser("search", help="nearest-neighbour sentences for queries",
                         description=__doc__)
    p.add_argument("queries", help="query sentences: one per line, or id<TAB>sentence")
    p.add_argument("database", help="sentences to search, same formats")
    p.add_argument("--out", required=True,
                   help="output TSV: query_id rank score match_id query match")
    p.add_argument("-k", type=int, default=10, help="neighbours per query (default 10)")
    add_input_options(p)
    add_encoder(p)
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    n = search_files(args.queries, args.database, encoder_from_args(args), args.out,
                     run_dir=run_dir(args), k=args.k, backend=args.backend,
                     model=load_model(args), query_lang=args.src_lang, db_lang=args.tgt_lang,
                     format=args.format, skip_bad=args.skip_bad_lines, chunk=args.chunk,
                     batch_size=args.batch_size)
    print(f"{n} queries x {args.k} neighbours -> {args.out}")  # noqa: T201
    return 0
