"""``disembed`` command line: one thin handler per verb over the public API."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import contextmanager
from typing import Sequence

from ..exceptions import DisembedError
from ..provenance import record_command
from ..util.cache_dir import CACHE_ENV_VAR
from ..version import __version__
from . import (
    analyse,
    bench,
    calibrate,
    data,
    encode,
    evaluate,
    export,
    filtering,
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
from .env import with_environment
from .errors import ignore_file_size_signal, report
from .flags import VerbParser, warn_deprecated
from .folders import check_folders
from .output import verb_output
from .overlap import check_args, written_paths

VERBS = (data, prepare, encode, tune, train, evaluate, calibrate, bench, scale, analyse, mine,
         score, filtering, search, export, serve, info)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="disembed",
        description="Split multilingual sentence embeddings into meaning and language parts.")
    parser.add_argument("--version", action="version", version=f"disembed {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB",
                                  parser_class=VerbParser)
    for module in VERBS:
        module.add_parser(verbs)
    return parser


def _verbs(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _configure_logging(verbosity: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbosity > 0 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("disembed").setLevel(level)


@contextmanager
def _cache_dir_everywhere(cache_dir: str | None):
    """``--cache-dir`` for every cache of the run (the hardware probe's too), not only the
    embeddings: ``$DISEMBED_CACHE_DIR`` while the verb runs, restored afterwards."""
    if not cache_dir:
        yield
        return
    before = os.environ.get(CACHE_ENV_VAR)
    os.environ[CACHE_ENV_VAR] = str(cache_dir)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV_VAR, None)
        else:
            os.environ[CACHE_ENV_VAR] = before


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; returns the exit code (0 done, 2 user error, 1 bug, 130 Ctrl-C: see
    :mod:`disembed.cli.errors`)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(with_environment(_verbs(parser), argv))
    except DisembedError as exc:  # a bad DISEMBED_* variable: before anything starts
        parser.exit(2, f"disembed: error: {exc}\n")
    record_command(["disembed", *argv])  # as typed: variables (a key) stay out of it
    _configure_logging(args.verbose, args.quiet)
    warn_deprecated(args)
    ignore_file_size_signal()
    try:
        check_args(args)  # no output overlaps an input: before any work
        check_folders(args)  # no folder of the user's, no finished result replaced
        with verb_output(quiet=args.quiet, no_progress=args.no_progress), \
                _cache_dir_everywhere(getattr(args, "cache_dir", None)):
            return int(args.handler(args) or 0)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - every error ends here
        return report(args.verb, exc, args.verbose, written_paths(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
