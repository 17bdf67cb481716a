"""``disembed bench``: the main job. Build training data, train every method, evaluate all
three tasks on meaning and language parts, and write ``results.md`` + ``bench.json``.

Finished runs are reused and interrupted training resumes; ``--force`` redoes them
(embeddings still come from the cache).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from ..evaluation import DEFAULT_TASKS
from ..exceptions import ConfigError
from ..experiment import (
    DEFAULT_MAX_EVAL_ITEMS,
    DEFAULT_METHODS,
    DEFAULT_PAIRS_PER_LANGUAGE,
    DEFAULT_RECIPE,
    DEFAULT_RECIPE_PARAMS,
    DEFAULT_TRAIN_LANGUAGES,
    BenchConfig,
    all_methods,
    check_method_params,
    run_bench,
    shared_overrides,
)
from ..reports.bench_report import render_bench
from ..reports.mteb_results import write_mteb_results
from .common import (
    SEED_HELP,
    TASKS_HELP,
    add_common,
    add_encoders,
    add_eval_options,
    add_training_path,
    add_workspace_options,
    csv_list,
    output_dir,
    pairs_or_all,
    positive_float,
    positive_int,
    seed,
    task_options_from_args,
    training_path,
    workspace_from_args,
)
from .flags import examples
from .folders import add_overwrite

logger = logging.getLogger(__name__)

def add_parser(verbs) -> None:
    p = verbs.add_parser("bench", help="train and evaluate every method (the main job)",
                         description=__doc__, epilog=examples(
                             "disembed bench",
                             "disembed bench --encoder e5-small,use-m3 --max-items all "
                             "--out runs/full"))
    add_encoders(p, "bench")
    p.add_argument("--methods", type=csv_list, default=list(DEFAULT_METHODS),
                   help="comma-separated methods, or 'all' for every registered one "
                        f"(default: {','.join(DEFAULT_METHODS)})")
    p.add_argument("--languages", type=csv_list, default=None,
                   help="training languages, each paired with English (default: "
                        f"{','.join(DEFAULT_TRAIN_LANGUAGES)}, leaving out any without "
                        "training data in the data folder)")
    p.add_argument("--pairs-per-language", type=pairs_or_all, default=DEFAULT_PAIRS_PER_LANGUAGE,
                   help=f"training pairs per language, or 'all' (default: "
                        f"{DEFAULT_PAIRS_PER_LANGUAGE})")
    p.add_argument("--tasks", type=csv_list, default=list(DEFAULT_TASKS),
                   help=TASKS_HELP)
    p.add_argument("--max-epochs", type=positive_int, default=None,
                   help="epoch budget for trained methods (default: until early stopping)")
    p.add_argument("--time-budget", type=positive_float, default=None,
                   metavar="SECONDS",
                   help="training time budget per trained method (default: none)")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="learning rate for trained methods (default: each recipe's)")
    p.add_argument("--params", type=read_params, default={}, metavar="FILE",
                   help="JSON {method: {param: value}}, e.g. the tuned.json of 'disembed tune' "
                        f"(default: {DEFAULT_RECIPE} with "
                        f"{', '.join(f'{k}={v}' for k, v in DEFAULT_RECIPE_PARAMS.items())}, "
                        "every other recipe with its own defaults)")
    p.add_argument("--seed", type=seed, default=0, help=SEED_HELP)
    p.add_argument("--no-floor", action="store_true", help="skip the hash-encoder floor row")
    p.add_argument("--out", type=output_dir, default="runs/bench", help="output directory")
    add_overwrite(p, "nothing: finished runs are reused")
    p.add_argument("--force", action="store_true", help="redo finished runs")
    p.add_argument("--format", choices=("md", "mteb"), default="md",
                   help="md: results.md, report.html, plots (always written); mteb: also "
                        "MTEB's result JSON per run and task under OUT/mteb/")
    add_eval_options(p, max_items_default=DEFAULT_MAX_EVAL_ITEMS)
    add_training_path(p)
    add_common(p)
    add_workspace_options(p)
    p.set_defaults(handler=handle)


def read_params(path: str) -> dict[str, dict]:
    """``{method: {param: value}}`` from a JSON file (``tuned.json``)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise argparse.ArgumentTypeError(f"{path}: expected {{method: {{param: value}}}}, as "
                                         "written by 'disembed tune'")
    try:  # every method of the file, used by this run or not
        check_method_params(data, path)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return data


def merge_params(from_file: dict, overrides: dict, methods: list[str]) -> dict[str, dict]:
    """The file's settings for the bench's methods, command-line overrides on top."""
    out = {m: dict(from_file[m]) for m in methods if m in from_file}
    for method, params in overrides.items():
        out.setdefault(method, {}).update(params)
    return out


def handle(args: argparse.Namespace) -> int:
    methods = list(dict.fromkeys(
        m for name in args.methods for m in (all_methods() if name == "all" else [name])))
    config = BenchConfig(
        encoders=args.encoder, methods=methods,
        languages=args.languages or list(DEFAULT_TRAIN_LANGUAGES),
        skip_missing_languages=args.languages is None,
        pairs_per_language=args.pairs_per_language, tasks=args.tasks,
        task_options=task_options_from_args(args), max_eval_items=args.max_eval_items,
        seed=args.seed,
        method_params=merge_params(
            args.params, shared_overrides(methods, {"max_epochs": args.max_epochs,
                                                    "time_budget_seconds": args.time_budget,
                                                    "lr": args.lr, **training_path(args)}),
            methods),
        floor=not args.no_floor, out_dir=args.out,
        workspace=workspace_from_args(args, force=args.force))
    result = run_bench(config)
    if args.format == "mteb":
        files = write_mteb_results(result, Path(args.out) / "mteb")
        logger.info("MTEB result files: %d under %s", len(files), Path(args.out) / "mteb")
    print(render_bench(result))  # noqa: T201
    return 0
