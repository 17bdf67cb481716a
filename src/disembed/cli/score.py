"""``disembed score PAIRS.tsv``: score given pairs (cosine or margin) to filter a bitext.

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
from .flags import examples
from .mine import add_model_options, model_and_encoder


def add_parser(verbs) -> None:
    p = verbs.add_parser("score", help="score (and filter) given sentence pairs",
                         description=__doc__, epilog=examples(
                             "disembed score pairs.tsv --model models/seed-e5 --out scored.tsv",
                             "disembed score bitext.tsv --src-col de --tgt-col en --score ratio "
                             "--threshold 1.06 --out kept.tsv"))
    p.add_argument("pairs", type=input_file,
                   help="TSV with a header row naming the two sentence columns")
    p.add_argument("--out", required=True, type=output_file,
                   help="output TSV: score + the input columns")
    p.add_argument("--src-col", default="src", help="source column")
    p.add_argument("--tgt-col", default="tgt", help="target column")
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
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip ragged rows and empty sentences (counted)")
    add_model_options(p.add_argument_group("meaning part"), "source column",
                      "target column")
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    check_not_inputs(args.out, {"PAIRS": args.pairs, "--src-pool": args.src_pool,
                                "--tgt-pool": args.tgt_pool})
    pools = [[t for t in read_lines(f) if not is_blank(t)] if f else None
             for f in (args.src_pool, args.tgt_pool)]
    model, encoder = model_and_encoder(args)
    n = score_tsv(args.pairs, encoder, args.out, src_col=args.src_col,
                  tgt_col=args.tgt_col, kind=args.score, k=args.k, src_pool=pools[0],
                  tgt_pool=pools[1], threshold=args.threshold, skip_bad=args.skip_bad_lines,
                  batch_size=args.batch_size, model=model, src_lang=args.src_lang,
                  tgt_lang=args.tgt_lang)
    part = f", meaning part of {args.model}" if args.model else ""
    say(args, f"{n} pairs scored ({args.score}{part}) -> {args.out}")
    return 0
