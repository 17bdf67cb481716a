"""``disembed evaluate``: score a saved model (or the raw baseline) on the standard tasks.

Each task is run on the meaning and the language part; the tables go to stdout
and, with ``--out``, the full result with provenance to a JSON file.
"""

from __future__ import annotations

import argparse

from ..encoders import DEFAULT_ENCODER
from ..evaluation import DEFAULT_TASKS
from ..exceptions import ConfigError
from ..experiment import RunSpec, run
from ..methods import method_class
from ..reports.tables import render_tables
from .common import (
    SEED_HELP,
    TASKS_HELP,
    add_common,
    add_encoder,
    add_eval_options,
    csv_list,
    encoder_options,
    eval_options_from_args,
    input_dir,
    output_file,
    say,
    seed,
    workspace_from_args,
)
from .flags import examples


def add_parser(verbs) -> None:
    p = verbs.add_parser("evaluate", help="evaluate a model on Tatoeba, STS17, WMT20 QE, BUCC",
                         description=__doc__, epilog=examples(
                             "disembed evaluate --model models/seed-e5 --tasks tatoeba,sts17 "
                             "--max-items all --out result.json"))
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", type=input_dir,
                       help="a directory written by 'disembed train' (default: none, with "
                            "--method)")
    which.add_argument("--method", default=None,
                       help="an untrained method instead of --model (default: baseline, the "
                            "raw embedding)")
    p.add_argument("--tasks", type=csv_list, default=list(DEFAULT_TASKS), help=TASKS_HELP)
    p.add_argument("--seed", type=seed, default=0, help=SEED_HELP)
    p.add_argument("--out", type=output_file, default=None,
                   help="write the result with provenance as JSON (default: tables on stdout "
                        "only)")
    add_eval_options(p, max_items_default=None)
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    method = args.method or "baseline"
    if not args.model and method_class(method).needs_data:
        raise ConfigError(f"{method} must be trained first: run 'disembed train --method "
                          f"{method} --out DIR', then evaluate --model DIR")
    spec = RunSpec(method=method,
                   encoder=args.encoder if args.model else (args.encoder or DEFAULT_ENCODER),
                   encoder_options=encoder_options(args), model_dir=args.model,
                   tasks=tuple(args.tasks), evaluation=eval_options_from_args(args),
                   seed=args.seed, label=None if args.model else method)
    result = run(spec, workspace_from_args(args))
    say(args, render_tables([(result.label, s) for s in result.scores]))
    if args.out:
        result.to_json(args.out)
    return 0
