"""``disembed`` command line: one thin handler per verb over the public API."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from ..exceptions import DisembedError
from ..provenance import record_command
from ..version import __version__
from . import (
    analyse,
    bench,
    data,
    encode,
    evaluate,
    export,
    info,
    mine,
    prepare,
    scale,
    score,
    search,
    serve,
    train,
    tune,
)

VERBS = (data, prepare, encode, tune, train, evaluate, bench, scale, analyse, mine, score,
         search, export, serve, info)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="disembed",
        description="Split multilingual sentence embeddings into meaning and language parts.")
    parser.add_argument("--version", action="version", version=f"disembed {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in VERBS:
        module.add_parser(verbs)
    return parser


def _configure_logging(verbosity: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbosity > 0 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("disembed").setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    record_command(["disembed", *argv])
    _configure_logging(args.verbose, args.quiet)
    if args.no_progress:
        os.environ["DISEMBED_PROGRESS"] = "0"
    try:
        return int(args.handler(args) or 0)
    except DisembedError as exc:
        print(f"disembed {args.verb}: error: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    except KeyboardInterrupt:
        print(f"disembed {args.verb}: interrupted; rerun the same command to resume",  # noqa: T201
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
