"""``disembed evaluate``: score a saved model (or the raw baseline) on the standard tasks.

Each task is run on the meaning and the language part; the tables go to stdout
and, with ``--out``, the full result with provenance to a JSON file.
"""

from __future__ import annotations

import argparse
import logging

from ..exceptions import ConfigError
from ..methods import load_disentangler, make_method
from ..pipeline import evaluate
from ..provenance import environment
from ..results import RunResult
from .common import add_common, add_encoder, csv_list, encoder_from_args

logger = logging.getLogger(__name__)


def add_parser(verbs) -> None:
    p = verbs.add_parser("evaluate", help="evaluate a model on Tatoeba, STS17, WMT20 QE",
                         description=__doc__)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", help="a directory written by 'disembed train'")
    which.add_argument("--method", default=None, help="an untrained method (baseline)")
    p.add_argument("--tasks", type=csv_list, default=["tatoeba", "sts17", "wmt20-qe"])
    p.add_argument("--tatoeba-languages", default="tatoeba-14",
                   help="tatoeba-14, tatoeba-36, all, or a comma-separated list")
    p.add_argument("--qe-split", default="test", choices=("test", "test21"))
    p.add_argument("--max-items", type=int, default=None, help="seeded subsample per subset")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the result with provenance as JSON")
    add_encoder(p)
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..reports.tables import render_tables

    if args.model:
        model = load_disentangler(args.model)
        spec = model.metadata_.get("encoder_spec")
        if spec and args.encoder != spec:
            logger.info("using the model's encoder %s", spec)
            args.encoder = spec
        label = f"{model.method} ({args.model})"
    else:
        model = make_method(args.method or "baseline")
        if model.method != "baseline":
            raise ConfigError(f"{model.method} must be trained first: run 'disembed train "
                              f"--method {model.method} --out DIR', then --model DIR")
        label = "baseline"
    encoder = encoder_from_args(args)
    saved = getattr(model, "metadata_", {}).get("encoder")
    if saved and saved != encoder.identity.to_dict():
        raise ConfigError(f"the model was trained on encoder {saved} but --encoder gives "
                          f"{encoder.identity.to_dict()}; evaluate with the training encoder")
    if not model.is_fitted:
        model.dim_ = encoder.dim
    tatoeba_langs = args.tatoeba_languages
    if "," in tatoeba_langs:
        tatoeba_langs = csv_list(tatoeba_langs)
    common = {"max_items": args.max_items, "seed": args.seed}
    options = {"tatoeba": {**common, "languages": tatoeba_langs},
               "sts17": dict(common), "wmt20-qe": {**common, "split": args.qe_split}}
    scores = evaluate(model, encoder, args.tasks, task_options=options, data_dir=args.data_dir,
                      batch_size=args.batch_size)
    print(render_tables([(label, s) for s in scores]))  # noqa: T201
    if args.out:
        RunResult(method=model.method, method_params=model.get_params(),
                  encoder=encoder.identity.to_dict(), seed=args.seed,
                  scores=[s.to_dict() for s in scores], environment=environment(),
                  config={"tasks": args.tasks, "task_options": options,
                          "model": args.model}).to_json(args.out)
    return 0
