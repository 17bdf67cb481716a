"""``disembed analyse``: why one method wins. Trains methods (like ``bench``) and/or loads
saved models, evaluates them, and runs the chosen analyses: semantic leakage (language-ID
probe), code-switching robustness, alignment/uniformity geometry, paired significance
tests, a Matryoshka-style dimensionality sweep, and plots. Writes ``<out>/analysis.md``
with the PNGs beside it, and ``<out>/analysis.json``.

``--bench DIR`` instead tests every "method A beats B" of a finished ``disembed bench``
output (its per-item ``items.npz`` files) and writes ``<out>/significance.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis.items import compare_bench
from ..experiment import DEFAULT_METHODS, DEFAULT_TRAIN_LANGUAGES
from ..experiment.analyse import ANALYSES, AnalysisConfig, run_analyses
from ..reports.analysis_report import render_comparisons
from ..util.files import atomic_write_text
from ..util.jsonsafe import dumps_json
from .common import (
    LANGUAGES_HELP,
    SEED_HELP,
    TASKS_HELP,
    add_common,
    add_eval_options,
    add_workspace_options,
    csv_list,
    finite_float,
    input_dir,
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
    p = verbs.add_parser("analyse", help="leakage, code-switching, geometry, significance, "
                         "dimensionality and plots for several methods", description=__doc__,
                         epilog=examples(
                             "disembed analyse --encoder use-m3 --pairs-per-language 1000 "
                             "--out runs/analysis",
                             "disembed analyse --bench runs/bench --out runs/bench-significance"))
    p.add_argument("--model", action="append", default=[], metavar="DIR", type=input_dir,
                   help="a saved model directory (repeatable); its encoder is used (default: "
                        "none)")
    p.add_argument("--bench", default=None, metavar="DIR", type=input_dir,
                   help="only significance tests over a finished 'disembed bench' folder "
                        "(default: none)")
    p.add_argument("--methods", type=csv_list, default=None,
                   help=f"methods to train on the fly (default without --model: "
                        f"{','.join(DEFAULT_METHODS)}; with --model: none)")
    p.add_argument("--encoder", default=None,
                   help="encoder spec (default: the saved models' encoder, else e5-small)")
    p.add_argument("--analyses", type=csv_list, default=list(ANALYSES),
                   help=f"comma-separated subset of {','.join(ANALYSES)} (default: all)")
    p.add_argument("--languages", type=csv_list, default=list(DEFAULT_TRAIN_LANGUAGES),
                   help=LANGUAGES_HELP)
    p.add_argument("--pairs-per-language", type=pairs_or_all, default=1000,
                   help="training pairs per language for the methods trained here, or 'all'")
    p.add_argument("--tasks", type=csv_list, default=["tatoeba", "sts17"], help=TASKS_HELP)
    p.add_argument("--sample-pairs", type=positive_int, default=1000,
                   help="held-out Tatoeba pairs for geometry and projections")
    p.add_argument("--probe-per-language", type=positive_int, default=400,
                   help="Tatoeba sentences per language (and English) for the LID probe")
    p.add_argument("--codeswitch-rate", type=finite_float, default=0.3,
                   help="share of each sentence's words replaced by English for the "
                        "code-switching test")
    p.add_argument("--truncation-ks", type=lambda s: [positive_int(x) for x in csv_list(s)],
                   default=[16, 64, 128, 256],
                   help="comma-separated numbers of leading dimensions for the truncation sweep")
    p.add_argument("--n-resamples", type=positive_int, default=2000,
                   help="bootstrap resamples per comparison")
    p.add_argument("--max-epochs", type=positive_int, default=None,
                   help="epoch budget for trained methods (default: until early stopping)")
    p.add_argument("--seed", type=seed, default=0, help=SEED_HELP)
    p.add_argument("--out", type=output_dir, default="runs/analysis",
                   help="folder for analysis.md, report.html and the plots")
    add_eval_options(p, max_items_default=None)
    add_overwrite(p, "nothing: finished runs are reused")
    add_common(p)
    add_workspace_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.bench:
        return _bench_significance(args)
    methods = args.methods if args.methods is not None else (
        [] if args.model else list(DEFAULT_METHODS))
    config = AnalysisConfig(
        encoder=args.encoder, methods=methods, models=args.model, analyses=args.analyses,
        languages=args.languages, pairs_per_language=args.pairs_per_language, tasks=args.tasks,
        task_options=task_options_from_args(args), max_eval_items=args.max_eval_items,
        sample_pairs=args.sample_pairs, probe_per_language=args.probe_per_language,
        codeswitch_rate=args.codeswitch_rate, truncation_ks=args.truncation_ks,
        n_resamples=args.n_resamples, max_epochs=args.max_epochs, seed=args.seed,
        out_dir=args.out, workspace=workspace_from_args(args))
    run_analyses(config)
    print(f"{args.out}/report.html")  # noqa: T201
    return 0


def _bench_significance(args: argparse.Namespace) -> int:
    comparisons = compare_bench(args.bench, n_resamples=args.n_resamples, seed=args.seed)
    out = Path(args.out)
    text = "\n".join([f"# Significance of {args.bench}", "", *render_comparisons(comparisons)])
    atomic_write_text(out / "significance.md", text)
    atomic_write_text(out / "significance.json",
                      dumps_json([c.to_dict() for c in comparisons]))
    print(text)  # noqa: T201
    return 0
