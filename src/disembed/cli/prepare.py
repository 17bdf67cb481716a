"""``disembed prepare``: encode a whole training pool and the evaluation sets into the
cache ahead of training, in resumable steps (evaluation sets, held-out pairs, then the pool
in growing prefixes). Interrupt it at any time and run it again to continue; ``bench``,
``train``, ``tune`` and ``scale`` then encode nothing. Runs well in the background::

    nohup disembed prepare --pairs-per-language all > prepare.log 2>&1 &
"""

from __future__ import annotations

import argparse

from ..evaluation import DEFAULT_TASKS
from ..experiment import DEFAULT_TRAIN_LANGUAGES
from ..experiment.prepare import PrepareConfig, prepare, render_prepared
from .common import (
    LANGUAGES_HELP,
    SEED_HELP,
    add_common,
    add_encoders,
    add_eval_options,
    add_workspace_options,
    csv_list,
    eval_options_from_args,
    pairs_or_all,
    positive_int,
    seed,
    workspace_from_args,
)
from .flags import examples


def add_parser(verbs) -> None:
    p = verbs.add_parser("prepare", help="encode a training pool and the evaluation sets "
                         "ahead (resumable)", description=__doc__, epilog=examples(
                             "disembed prepare --pairs-per-language 5000 --holdout 300"))
    add_encoders(p, "prepare")
    p.add_argument("--languages", type=csv_list, default=list(DEFAULT_TRAIN_LANGUAGES),
                   help=LANGUAGES_HELP)
    p.add_argument("--pairs-per-language", type=pairs_or_all, default=None,
                   help="the largest training size to encode, or 'all' (default: all)")
    p.add_argument("--tiers", type=lambda s: [positive_int(x) for x in csv_list(s)],
                   default=[500, 2000, 5000],
                   help="smaller sizes encoded first, so they are usable early "
                        "(default: 500,2000,5000)")
    p.add_argument("--holdout", type=int, default=0, metavar="N",
                   help="held-out validation pairs per language (as for 'disembed tune'; "
                        "default 0)")
    p.add_argument("--tasks", type=csv_list, default=list(DEFAULT_TASKS),
                   help="evaluation sets to encode (and keep out of the pool)")
    p.add_argument("--seed", type=seed, default=0, help=SEED_HELP)
    add_eval_options(p, max_items_default=None)
    add_common(p)
    add_workspace_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    config = PrepareConfig(
        encoders=args.encoder, languages=args.languages,
        pairs_per_language=args.pairs_per_language, tiers=args.tiers,
        holdout_per_language=args.holdout, tasks=args.tasks,
        evaluation=eval_options_from_args(args), seed=args.seed,
        workspace=workspace_from_args(args))
    print(render_prepared(prepare(config)))  # noqa: T201
    return 0
