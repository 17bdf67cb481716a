"""``disembed score PAIRS [TGT]``: score given pairs (cosine or margin) to filter a bitext.

The input is read as ``filter`` reads it: a TSV with a header row naming --src-col and
--tgt-col or without one (the first two columns, or columns by number), or two line-aligned
files; .gz or - (stdin). Writes score + the input columns. --score cosine streams in chunks.

With ``--model`` the pairs are scored on the model's meaning part (each sentence's language
identified by the model, among the training languages that write its script, unless
``--src-lang``/``--tgt-lang`` name it), as ``mine`` and ``search`` do.
"""

from __future__ import annotations

import argparse

from ..data.io import read_lines
from ..mining import SCORE_KINDS, score_tsv
from ..util.text import is_blank
from .common import (
    add_common,
    add_encoder,
    check_not_inputs,
    finite_float,
    input_file,
    output_file,
    positive_int,
    say,
)
from .filtering import add_bitext_options, check_bitext_inputs
from .flags import examples
from .mine import add_model_options, model_and_encoder


def add_parser(verbs) -> None:
    p = verbs.add_parser("score", help="score (and filter) given sentence pairs",
                         description=__doc__, epilog=examples(
                             "disembed score pairs.tsv --model models/seed-e5 --out scored.tsv",
                             "disembed score bitext.tsv --src-col de --tgt-col en --score ratio "
                             "--threshold 1.06 --out kept.tsv"))
    p.add_argument("inputs", type=input_file, nargs="+", metavar="PAIRS",
                   help="a TSV (with a header naming --src-col/--tgt-col, or without one: "
                        "the first two columns), or two line-aligned files; .gz or - (stdin)")
    p.add_argument("--out", required=True, type=output_file,
                   help="output TSV: score + the input columns")
    p.add_argument("--score", choices=SCORE_KINDS, default="cosine",
                   help="cosine, or the ratio/distance margin against reference pools")
    p.add_argument("-k", type=positive_int, default=4, help="neighbours for the margin (default 4)")
    p.add_argument("--src-pool", type=input_file, default=None,
                   help="file of source sentences (one per line) for the margin; default: the "
                        "pairs' own sources")
    p.add_argument("--tgt-pool", type=input_file, default=None,
                   help="file of target sentences for the margin (default: the pairs' own "
                        "targets)")
    p.add_argument("--threshold", type=finite_float, default=None,
                   help="write only pairs >= this (default: write all)")
    g = add_bitext_options(p)
    g.add_argument("--chunk-size", type=positive_int, default=10000,
                   help="pairs embedded and written together by --score cosine (default "
                        "10000); the margins read the whole input")
    add_model_options(p.add_argument_group("meaning part"), "source column",
                      "target column")
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    check_bitext_inputs(args.inputs)
    check_not_inputs(args.out, {**{f"PAIRS {i + 1}": f for i, f in enumerate(args.inputs)},
                                "--src-pool": args.src_pool, "--tgt-pool": args.tgt_pool})
    pools = [[t for t in read_lines(f) if not is_blank(t)] if f else None
             for f in (args.src_pool, args.tgt_pool)]
    model, encoder = model_and_encoder(args)
    n = score_tsv(args.inputs, encoder, args.out, src_col=args.src_col,
                  tgt_col=args.tgt_col, kind=args.score, k=args.k, src_pool=pools[0],
                  tgt_pool=pools[1], threshold=args.threshold, skip_bad=args.skip_bad_lines,
                  batch_size=args.batch_size, model=model, src_lang=args.src_lang,
                  tgt_lang=args.tgt_lang, header=args.header, chunk_size=args.chunk_size)
    part = f", meaning part of {args.model}" if args.model else ""
    say(args, f"{n} pairs scored ({args.score}{part}) -> {args.out}")
    return 0
