"""``disembed scale``: the data-scaling study. Every method at several training sizes
(pairs per language, ``all`` = the whole pool but the held-out pairs), trained recipes with
several seeds; per-seed scores, their mean and a seeds+items bootstrap interval against
mean-centering (Holm-corrected over the report), with and without language tags; one plot
per task of the score against the training size with the language part's leakage beside it. Writes
``<out>/scaling.md``, ``report.html``, ``scaling.json`` and the plots; every run is saved
and reused, so the study resumes and can be extended. Encode the pool first with
``disembed prepare`` (hours on e5-small).
"""

from __future__ import annotations

import argparse

from ..experiment import DEFAULT_TRAIN_LANGUAGES
from ..experiment.scaling import DEFAULT_SCALING_METHODS, ScalingConfig, run_scaling
from .bench import read_params
from .common import (
    ENCODER_SPECS,
    LANGUAGES_HELP,
    TASKS_HELP,
    add_common,
    add_eval_options,
    add_workspace_options,
    csv_list,
    output_dir,
    pairs_or_all,
    positive_int,
    seed,
    task_options_from_args,
    workspace_from_args,
)
from .flags import examples
from .folders import add_overwrite


def add_parser(verbs) -> None:
    p = verbs.add_parser("scale", help="the data-scaling study (sizes x methods x seeds)",
                         description=__doc__, epilog=examples(
                             "disembed scale --methods mean-centering,seed-centered "
                             "--sizes 500,2000 --seeds 0,1,2 --out runs/scaling"))
    p.add_argument("--encoder", default="e5-small", help=f"encoder spec: {ENCODER_SPECS}")
    p.add_argument("--methods", type=csv_list, default=list(DEFAULT_SCALING_METHODS),
                   help="comma-separated methods")
    p.add_argument("--sizes", type=lambda s: [pairs_or_all(x) for x in csv_list(s)],
                   default=[500, 2000, 5000, None],
                   help="pairs per language, 'all' for the pool (default 500,2000,5000,all)")
    p.add_argument("--seeds", type=lambda s: [seed(x) for x in csv_list(s)], default=[0, 1, 2],
                   help="comma-separated training seeds of every trained recipe")
    p.add_argument("--languages", type=csv_list, default=list(DEFAULT_TRAIN_LANGUAGES),
                   help=LANGUAGES_HELP)
    p.add_argument("--holdout", type=int, default=300, metavar="N",
                   help="pairs per language held out at every size (as for tune)")
    p.add_argument("--tasks", type=csv_list, default=["tatoeba", "sts17", "wmt20-qe"],
                   help=TASKS_HELP)
    p.add_argument("--params", type=read_params, default={}, metavar="FILE",
                   help="JSON {method: {param: value}}, e.g. tune's tuned.json (default: "
                        "each recipe's own defaults)")
    p.add_argument("--reference", default="mean-centering",
                   help="the method every other is compared with (bootstrap intervals)")
    p.add_argument("--n-resamples", type=positive_int, default=2000,
                   help="bootstrap resamples per comparison")
    p.add_argument("--out", type=output_dir, default="runs/scaling",
                   help="folder for scaling.md, report.html, the plots and every run")
    add_overwrite(p, "nothing: finished runs are reused")
    p.add_argument("--finished-only", action="store_true",
                   help="report the points already finished in --out and fit nothing (a "
                        "study whose slow recipes ran at fewer sizes or seeds)")
    add_eval_options(p, max_items_default=None,
                     task_defaults=ScalingConfig.__dataclass_fields__["task_options"]
                     .default_factory())
    add_common(p)
    add_workspace_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    config = ScalingConfig(
        encoder=args.encoder, methods=args.methods, sizes=args.sizes, seeds=args.seeds,
        languages=args.languages, holdout_per_language=args.holdout, tasks=args.tasks,
        max_eval_items=args.max_eval_items, task_options=task_options_from_args(args),
        params=args.params, reference=args.reference, n_resamples=args.n_resamples,
        out_dir=args.out, workspace=workspace_from_args(args),
        finished_only=args.finished_only)
    run_scaling(config)
    print(f"{args.out}/report.html")  # noqa: T201
    return 0
