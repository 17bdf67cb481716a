"""``disembed train``: fit a method on parallel data and save it as config.json + model.safetensors.

Training data is either built from ``<data-dir>/parallel`` for ``--languages``
(pairs overlapping the evaluation sets removed) or read from ``--pairs FILE.tsv``.

By default it trains what ``bench`` trains as its default recipe, with the same settings
(``DEFAULT_RECIPE`` / ``DEFAULT_RECIPE_PARAMS``: one source of truth). Any hyperparameter
of any recipe is reachable with ``--params``: a JSON object or a file holding one, either
``{"lr": 0.003, "init_scale": 0.9}`` or ``{METHOD: {...}}`` as ``disembed tune`` writes it.
Precedence: the recipe's defaults < bench's defaults for the default recipe < ``--params``
< the explicit options (``--lr``, ``--max-epochs`` ...).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ..exceptions import ConfigError
from ..experiment import (
    DEFAULT_RECIPE,
    DEFAULT_RECIPE_PARAMS,
    DEFAULT_TRAIN_LANGUAGES,
    RunOutputs,
    RunSpec,
    TrainingData,
    run,
)
from ..experiment.bench import default_params
from ..methods import METHODS, method_class
from .common import (
    LANGUAGES_HELP,
    SEED_HELP,
    add_common,
    add_encoder,
    add_training_path,
    csv_list,
    encoder_options,
    input_file,
    output_dir,
    pairs_or_all,
    positive_float,
    positive_int,
    seed,
    training_path,
    workspace_from_args,
)
from .flags import examples
from .folders import add_overwrite

logger = logging.getLogger(__name__)


def add_parser(verbs) -> None:
    p = verbs.add_parser("train", help="train a disentangler and save it", description=__doc__,
                         epilog=examples(
                             "disembed train --languages de,zh,ne --pairs-per-language 2000 "
                             "--out models/seed-e5",
                             "disembed train --pairs my_bitext.tsv --src-col de --tgt-col en "
                             "--out models/mine"))
    default = ", ".join(f"{k}={v}" for k, v in DEFAULT_RECIPE_PARAMS.items())
    p.add_argument("--method", default=DEFAULT_RECIPE,
                   help=f"one of {', '.join(METHODS.names())}, or oracle+<trained recipe> "
                        f"(default: bench's default recipe, {DEFAULT_RECIPE} with {default})")
    p.add_argument("--params", type=params_arg, default=None, metavar="FILE|JSON",
                   help='hyperparameters: a JSON object or a file holding one, {"lr": 0.003} '
                        "or {METHOD: {...}} as 'disembed tune' writes it; any parameter of "
                        "the recipe (see docs); explicit options below win (default: the "
                        "recipe's own, and bench's for the default recipe)")
    p.add_argument("--out", required=True, type=output_dir,
                   help="directory for config.json + model.safetensors")
    add_overwrite(p, "a trained model in --out")
    _add_data_options(p.add_argument_group("training data"))
    _add_training_options(p.add_argument_group("training (trained methods)"))
    add_training_path(p)
    add_encoder(p)
    add_common(p)
    p.set_defaults(handler=handle)


def _add_data_options(data) -> None:
    """Where the training pairs come from: the bundled languages or the user's TSV."""
    data.add_argument("--languages", type=csv_list, default=list(DEFAULT_TRAIN_LANGUAGES),
                      help=LANGUAGES_HELP)
    data.add_argument("--pairs-per-language", type=pairs_or_all, default=2000,
                      help="pairs per language (>= 20) or 'all' (default 2000)")
    data.add_argument("--pairs", type=input_file, default=None,
                      help="your own TSV of pairs instead of --languages, with a header row "
                           "(default: none)")
    data.add_argument("--src-col", default=None,
                      help="--pairs: the source column (default: none; required with --pairs)")
    data.add_argument("--tgt-col", default=None,
                      help="--pairs: the target column (default: none; required with --pairs)")
    data.add_argument("--src-lang", default=None,
                      help="--pairs: the source language (default: the column name)")
    data.add_argument("--tgt-lang", default=None,
                      help="--pairs: the target language (default: the column name)")
    data.add_argument("--skip-bad-lines", action="store_true",
                      help="--pairs: skip ragged rows and empty sentences (counted) instead of "
                           "stopping")


def _add_training_options(hp) -> None:
    """How a trained recipe is trained (closed-form recipes ignore these)."""
    hp.add_argument("--lr", type=positive_float, default=None,
                    help="learning rate (default: the recipe's, 3e-3 for the default recipe)")
    hp.add_argument("--train-batch-size", type=positive_int, default=None,
                    help="pairs per training step (default: the recipe's, 512)")
    hp.add_argument("--max-epochs", type=positive_int, default=None,
                    help="epoch budget (default: until early stopping on the validation loss)")
    hp.add_argument("--max-steps", type=positive_int, default=None,
                    help="step budget (default: none)")
    hp.add_argument("--time-budget", type=positive_float, default=None, metavar="SECONDS",
                    help="training time budget (default: none)")
    hp.add_argument("--patience", type=positive_int, default=None,
                    help="epochs without a better validation loss before training stops "
                         "(default: the recipe's, 5)")
    hp.add_argument("--no-dev-validation", dest="dev_validation", action="store_false",
                    help="fit once, without WMT20 QE dev (the default recipe's mirror=True "
                         "chooses between two fits on it when the data is present; off "
                         "anyway when it is absent)")
    hp.add_argument("--seed", type=seed, default=0, help=SEED_HELP)
    hp.add_argument("--negatives", choices=("paper", "official"), default=None,
                    help="same-language negatives as the paper describes them or as the "
                         "official code draws them (default: the recipe's, paper)")


def params_arg(text: str) -> dict:
    """``--params``: a JSON object given inline (starts with ``{``) or in a file."""
    if text.lstrip().startswith("{"):
        where, raw = "--params", text
    else:
        try:
            with open(text, encoding="utf-8") as f:
                where, raw = text, f.read()
        except OSError as exc:
            raise argparse.ArgumentTypeError(
                f"cannot read {text}: {exc.strerror}; give a JSON file or an inline JSON "
                'object such as \'{"lr": 0.003}\'') from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"{where}: expected a JSON object "
                                         '{"param": value} or {METHOD: {"param": value}}')
    return data


def method_params_from(method: str, given: dict | None) -> dict:
    """The settings for ``method``: bench's defaults, then ``--params`` (either form)."""
    params = default_params(method)
    if not given:
        return params
    nested = [k for k, v in given.items() if isinstance(v, dict)]
    if nested and len(nested) != len(given):
        raise ConfigError("--params mixes {METHOD: {...}} entries with plain parameters; use "
                          'one form: {"lr": 0.003} or {"' + method + '": {"lr": 0.003}}')
    if nested:
        if method not in given:
            raise ConfigError(f"--params has settings for {', '.join(sorted(given))} but not "
                              f"for --method {method}; add a \"{method}\" entry or pass the "
                              "parameters directly")
        given = given[method]
    params.update(given)
    return params


def training_data(args: argparse.Namespace) -> TrainingData:
    if args.pairs:
        return TrainingData(pairs_file=args.pairs, src_col=args.src_col, tgt_col=args.tgt_col,
                            src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                            skip_bad=args.skip_bad_lines)
    if args.src_col or args.tgt_col:
        raise ConfigError("--src-col/--tgt-col name the columns of --pairs FILE.tsv; give "
                          "--pairs too (or leave them out to build data from --languages)")
    return TrainingData(tuple(args.languages), args.pairs_per_language, seed=args.seed)


def handle(args: argparse.Namespace) -> int:
    out = Path(args.out)
    params = method_params_from(args.method, args.params)
    params.update({k: v for k, v in (("lr", args.lr), ("batch_size", args.train_batch_size),
                                ("max_epochs", args.max_epochs), ("max_steps", args.max_steps),
                                ("time_budget_seconds", args.time_budget),
                                ("patience", args.patience),
                                ("negatives", args.negatives)) if v is not None})
    params.update(training_path(args))
    if not args.dev_validation and "mirror" in method_class(args.method).param_names():
        params["mirror"] = False
    spec = RunSpec(method=args.method, params=params, encoder=args.encoder,
                   encoder_options=encoder_options(args), data=training_data(args), tasks=(),
                   seed=args.seed)
    result = run(spec, workspace_from_args(args),
                 outputs=RunOutputs(model_dir=out, checkpoint_dir=out / "checkpoint"))
    summary = {"method": result.method, "params": spec.params, "out": str(out),
               "pairs": result.training["data"]["total_pairs"],
               "fit_seconds": round(result.timings["fit_seconds"], 2)}
    history = result.training.get("history")
    if history:
        epochs = history["epochs"]
        summary.update(epochs=len(epochs), best_epoch=history["best_epoch"],
                       stop_reason=history.get("stop_reason"),
                       budget_bound=history.get("budget_bound"),
                       pairs_per_second=round(sum(e["train_pairs"] for e in epochs)
                                              / max(sum(e["train_seconds"] for e in epochs),
                                                    1e-9)))
    summary["validation"] = result.training.get("validation")
    check = getattr(result.model, "reference_check_", None)
    if check:
        summary["kept"] = check["summary"]
        print(f"disembed train: {check['summary']}", file=sys.stderr)  # noqa: T201
        if not check["beat_reference"]:
            warning = ("warning: the learned recipe did not beat mean-centering on your "
                       "held-out pairs; the saved model is mean-centering")
            print(warning, file=sys.stderr)  # noqa: T201
    print(json.dumps(summary))  # noqa: T201
    return 0
