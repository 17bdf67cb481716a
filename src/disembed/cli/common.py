"""Options shared by several verbs, and the helpers that turn them into API objects."""

from __future__ import annotations

import argparse

from ..encoders import DEFAULT_ENCODER, load_encoder
from ..encoders.cached import cached
from ..evaluation import EvalOptions
from ..experiment import Workspace


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("general")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="debug logging (and a traceback on unexpected errors)")
    group.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    group.add_argument("--no-progress", action="store_true", help="no progress bars")
    group.add_argument("--data-dir", default=None,
                       help="folder with tatoeba/, sts17/, wmt20_mlqe/, parallel/ "
                            "(default: $DISEMBED_DATA_DIR or ../shared/data)")
    group.add_argument("--cache-dir", default=None,
                       help="embedding cache (default: $DISEMBED_CACHE_DIR or ~/.cache/disembed)")


def add_encoder(parser: argparse.ArgumentParser, default: str | None = DEFAULT_ENCODER) -> None:
    group = parser.add_argument_group("encoder")
    group.add_argument("--encoder", default=default,
                       help="e5-small (default), e5-small-c, use-m3, st:<name|path>, "
                            "npy:<file.npy>, hash[:dim]")
    group.add_argument("--pooling", default=None, help="st: mean, cls, lasttoken or max")
    group.add_argument("--prefix", default=None, help="st: text put before every sentence")
    group.add_argument("--max-length", type=positive_int, default=None,
                       help="st: token limit")
    group.add_argument("--batch-size", type=positive_int, default=64,
                       help="encoding batch size")
    group.add_argument("--cache-dtype", choices=("float32", "float16"), default="float32")


def encoder_options(args: argparse.Namespace) -> dict:
    """The st: options given on the command line (other encoders take none)."""
    if not (args.encoder or "").startswith("st:"):
        return {}
    return {k: v for k, v in (("pooling", args.pooling), ("prefix", args.prefix),
                              ("max_length", args.max_length)) if v is not None}


def encoder_from_args(args: argparse.Namespace):
    return cached(load_encoder(args.encoder, **encoder_options(args)), args.cache_dir,
                  args.cache_dtype)


def workspace_from_args(args: argparse.Namespace, **changes) -> Workspace:
    return Workspace(data_dir=args.data_dir, cache_dir=args.cache_dir,
                     cache_dtype=getattr(args, "cache_dtype", "float32"),
                     batch_size=getattr(args, "batch_size", 64), **changes)


def add_eval_options(parser: argparse.ArgumentParser, *, max_items_default: int | None) -> None:
    group = parser.add_argument_group("evaluation")
    group.add_argument("--tatoeba-languages", default="tatoeba-14",
                       help="tatoeba-14, tatoeba-36, all, or a comma-separated list")
    group.add_argument("--max-eval-items", "--max-items", dest="max_eval_items",
                       type=items_or_all, default=max_items_default,
                       help="seeded subsample per language/track/pair, or 'all' for the "
                            f"published protocol (default: {max_items_default or 'all'})")
    group.add_argument("--qe-split", default="test", choices=("test", "test21"))


def eval_options_from_args(args: argparse.Namespace) -> EvalOptions:
    return EvalOptions(max_items=args.max_eval_items, seed=args.seed,
                       tatoeba_languages=args.tatoeba_languages, qe_split=args.qe_split)


def csv_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def items_or_all(text: str) -> int | None:
    """A count >= 2 or ``all`` (None)."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected a number of items >= 2 or 'all', got "
                                         f"{text!r}")
    return value


def pairs_or_all(text: str) -> int | None:
    """Pairs per language: an integer >= 20 or ``all`` (None)."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 20:
        raise argparse.ArgumentTypeError(f"expected a number of pairs per language >= 20 or "
                                         f"'all', got {text!r}")
    return value
