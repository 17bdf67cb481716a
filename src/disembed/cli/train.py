"""``disembed train``: fit a method on parallel data and save it as config.json + model.safetensors.

Training data is either built from ``<data-dir>/parallel`` for ``--languages``
(pairs overlapping the evaluation sets removed) or read from ``--pairs FILE.tsv``.
"""

from __future__ import annotations

import argparse
import json
import logging

from ..bench import DEFAULT_TRAIN_LANGUAGES
from ..data.parallel import read_parallel_tsv
from ..data.training_set import build_training_set
from ..methods import METHODS, method_class
from ..pipeline import fit_method
from .common import add_common, add_encoder, csv_list, encoder_from_args

logger = logging.getLogger(__name__)


def add_parser(verbs) -> None:
    p = verbs.add_parser("train", help="train a disentangler and save it", description=__doc__)
    p.add_argument("--method", default="seed",
                   help=f"one of {', '.join(METHODS.names())}, or oracle+<trained recipe>")
    p.add_argument("--out", required=True, help="directory for config.json + model.safetensors")
    data = p.add_argument_group("training data")
    data.add_argument("--languages", type=csv_list, default=list(DEFAULT_TRAIN_LANGUAGES),
                      help="comma-separated languages paired with English")
    data.add_argument("--pairs-per-language", type=int, default=2000)
    data.add_argument("--pairs", default=None,
                      help="your own TSV of pairs instead (with --src-col/--tgt-col)")
    data.add_argument("--src-col", default=None)
    data.add_argument("--tgt-col", default=None)
    data.add_argument("--src-lang", default=None, help="default: the column name")
    data.add_argument("--tgt-lang", default=None, help="default: the column name")
    data.add_argument("--skip-bad-lines", action="store_true")
    hp = p.add_argument_group("training (trained methods)")
    hp.add_argument("--lr", type=float, default=None)
    hp.add_argument("--train-batch-size", type=int, default=None)
    hp.add_argument("--max-epochs", type=int, default=None)
    hp.add_argument("--patience", type=int, default=None)
    hp.add_argument("--seed", type=int, default=0)
    hp.add_argument("--negatives", choices=("paper", "official"), default=None)
    add_encoder(p)
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.pairs:
        if not (args.src_col and args.tgt_col):
            from ..exceptions import ConfigError

            raise ConfigError("--pairs needs --src-col and --tgt-col naming the two columns")
        pairs = read_parallel_tsv(args.pairs, args.src_col, args.tgt_col, args.src_lang,
                                  args.tgt_lang, skip_bad=args.skip_bad_lines)
        report = {"source": args.pairs, "pairs": len(pairs), "counts": pairs.counts(),
                  "skipped": sum(r.skipped for r in pairs.reports)}
    else:
        built = build_training_set(args.languages, args.pairs_per_language,
                                   data_dir=args.data_dir, seed=args.seed)
        pairs, report = built.pairs, built.report()
        logger.info(built.summary())
    params = {k: v for k, v in (("lr", args.lr), ("batch_size", args.train_batch_size),
                                ("max_epochs", args.max_epochs), ("patience", args.patience),
                                ("negatives", args.negatives)) if v is not None}
    accepted = method_class(args.method).param_names()
    if "seed" in accepted:
        params["seed"] = args.seed
    ignored = sorted(k for k in params if k not in accepted)
    if ignored:
        logger.warning("%s takes no %s; ignoring them", args.method, ", ".join(ignored))
    params = {k: v for k, v in params.items() if k in accepted}
    encoder = encoder_from_args(args)
    model = fit_method(args.method, encoder, pairs, params=params, batch_size=args.batch_size,
                       checkpoint_dir=f"{args.out}/checkpoint")
    model.save(args.out, metadata={"encoder": encoder.identity.to_dict(),
                                   "encoder_spec": args.encoder, "training": report})
    summary = {"method": args.method, "out": args.out, "pairs": len(pairs),
               "fit_seconds": round(model.fit_seconds_, 2)}
    if getattr(model, "history_", None):
        h = model.history_
        summary.update(epochs=len(h.epochs), best_epoch=h.best_epoch,
                       pairs_per_second=round(h.pairs_per_second))
    print(json.dumps(summary))  # noqa: T201
    return 0
