"""Options shared by several verbs, and helpers that turn them into API objects."""

from __future__ import annotations

import argparse

from ..encoders import DEFAULT_ENCODER, load_encoder
from ..pipeline import cached


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("general")
    group.add_argument("-v", "--verbose", action="count", default=0, help="debug logging")
    group.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    group.add_argument("--no-progress", action="store_true", help="no progress bars")
    group.add_argument("--data-dir", default=None,
                       help="folder with tatoeba/, sts17/, wmt20_mlqe/, parallel/ "
                            "(default: $DISEMBED_DATA_DIR or ../shared/data)")
    group.add_argument("--cache-dir", default=None,
                       help="embedding cache (default: $DISEMBED_CACHE_DIR or ~/.cache/disembed)")


def add_encoder(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("encoder")
    group.add_argument("--encoder", default=DEFAULT_ENCODER,
                       help="e5-small (default), e5-small-c, use-m3, st:<name|path>, "
                            "npy:<file.npy>, hash[:dim]")
    group.add_argument("--pooling", default=None, help="st: mean, cls, lasttoken or max")
    group.add_argument("--prefix", default=None, help="st: text put before every sentence")
    group.add_argument("--max-length", type=int, default=None, help="st: token limit")
    group.add_argument("--batch-size", type=int, default=64, help="encoding batch size")
    group.add_argument("--cache-dtype", choices=("float32", "float16"), default="float32")


def encoder_from_args(args: argparse.Namespace):
    options = {}
    if args.encoder.startswith("st:"):
        options = {k: v for k, v in (("pooling", args.pooling), ("prefix", args.prefix),
                                     ("max_length", args.max_length)) if v is not None}
    return cached(load_encoder(args.encoder, **options), args.cache_dir, args.cache_dtype)


def csv_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
