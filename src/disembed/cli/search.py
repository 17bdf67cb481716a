"""``disembed search QUERIES DATABASE``: the k nearest database sentences of every query."""

from __future__ import annotations

import argparse

from ..mining import search_files
from .common import (
    add_common,
    add_encoder,
    check_not_inputs,
    input_file,
    output_file,
    positive_int,
    say,
)
from .flags import examples
from .mine import add_input_options, backend_options, model_and_encoder, run_dir


def add_parser(verbs) -> None:
    p = verbs.add_parser("search", help="nearest-neighbour sentences for queries",
                         description=__doc__, epilog=examples(
                             "disembed search queries.txt corpus.txt --model models/seed-e5 "
                             "-k 5 --out hits.tsv"))
    p.add_argument("queries", type=input_file,
                   help="query sentences: one per line, or id<TAB>sentence")
    p.add_argument("database", type=input_file, help="sentences to search, same formats")
    p.add_argument("--out", required=True, type=output_file,
                   help="output TSV: query_id rank score match_id query match")
    p.add_argument("-k", type=positive_int, default=10, help="neighbours per query (default 10)")
    add_input_options(p, "search")
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    check_not_inputs(args.out, {"QUERIES": args.queries, "DATABASE": args.database})
    model, encoder = model_and_encoder(args)
    done = search_files(args.queries, args.database, encoder, args.out,
                        run_dir=run_dir(args), k=args.k, backend=args.backend, model=model,
                        query_lang=args.src_lang, db_lang=args.tgt_lang,
                        format=args.input_format,
                        skip_bad=args.skip_bad_lines, chunk=args.chunk,
                        batch_size=args.batch_size, backend_options=backend_options(args))
    say(args, f"{done.queries} queries x {done.neighbours} neighbours -> {args.out}"
          + (f" (-k {args.k}, but the database has only {done.neighbours} sentences)"
             if done.neighbours < args.k else ""))
    return 0
