"""``disembed tune``: choose each method's hyperparameters on held-out training pairs.

Every candidate of each method's grid (learning rates of trained recipes, ranks of lir /
lsar) is trained on the pool with ``--holdout`` pairs per language set aside and scored on
those pairs by xx<->en retrieval and WMT20 QE dev (never a test split); with ``--seeds``
every seeded candidate is fitted once per seed and scored by the mean. Writes
``<out>/tune.md`` (every candidate), ``tune.json`` and ``tuned.json``, which
``disembed bench --params <out>/tuned.json`` applies.
"""

from __future__ import annotations

import argparse
import json

from ..experiment import DEFAULT_PAIRS_PER_LANGUAGE, DEFAULT_TRAIN_LANGUAGES, TrainingData
from ..experiment.params import DEFAULT_TUNE_METHODS
from ..experiment.tune import TuneConfig, tune
from ..methods import tuning_grid
from ..reports.tune_report import render_tune
from ..util.fields import arg_type
from .common import (
    ENCODER_SPECS,
    LANGUAGES_HELP,
    SEED_HELP,
    add_common,
    add_workspace_options,
    csv_list,
    output_dir,
    pairs_or_all,
    seed,
    workspace_from_args,
)
from .flags import examples
from .folders import add_overwrite


def add_parser(verbs) -> None:
    p = verbs.add_parser("tune", help="choose hyperparameters on held-out training pairs",
                         description=__doc__, epilog=examples(
                             "disembed tune --methods seed,seed-centered --holdout 300 "
                             "--out runs/tune"))
    p.add_argument("--encoder", default="e5-small", help=f"encoder spec: {ENCODER_SPECS}")
    p.add_argument("--methods", type=csv_list, default=list(DEFAULT_TUNE_METHODS),
                   help="comma-separated methods to tune")
    p.add_argument("--languages", type=csv_list, default=list(DEFAULT_TRAIN_LANGUAGES),
                   help=LANGUAGES_HELP)
    p.add_argument("--pairs-per-language", type=pairs_or_all, default=DEFAULT_PAIRS_PER_LANGUAGE,
                   help="the training size the choice is for (default "
                        f"{DEFAULT_PAIRS_PER_LANGUAGE})")
    p.add_argument("--holdout", type=arg_type(TuneConfig, "data.holdout_per_language",
                                              noun="a number of pairs per language"),
                   default=300, metavar="N",
                   help="held-out validation pairs per language (default 300)")
    p.add_argument("--grid", type=json.loads, default={}, metavar="JSON",
                   help='override grids, e.g. \'{"seed": {"lr": [0.001, 0.003]}}\'; default: '
                        + "; ".join(f"{m}: {tuning_grid(m)}" for m in DEFAULT_TUNE_METHODS
                                    if tuning_grid(m)))
    p.add_argument("--seed", type=seed, default=0, help=SEED_HELP)
    p.add_argument("--seeds", type=lambda s: [seed(x) for x in csv_list(s)], default=[],
                   help="training seeds every seeded candidate is fitted with; it is scored "
                        "by the mean over them (default: --seed alone)")
    p.add_argument("--out", type=output_dir, default="runs/tune",
                   help="folder for tune.md, tune.json, tuned.json and the candidates' runs")
    add_overwrite(p, "nothing: finished runs are reused")
    add_common(p)
    add_workspace_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    data = TrainingData(tuple(args.languages), args.pairs_per_language, seed=args.seed,
                        holdout_per_language=args.holdout)
    config = TuneConfig(encoder=args.encoder, methods=args.methods, data=data, grids=args.grid,
                        seeds=args.seeds, out_dir=args.out, workspace=workspace_from_args(args))
    print(render_tune(tune(config)))  # noqa: T201
    return 0
