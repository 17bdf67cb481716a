"""``disembed encode``: embed a text file (one sentence per line) into a .npy matrix.

The matrix and its sentences (``OUT`` with ``.txt``) are written to temporary files and
renamed into place when both are complete: an interrupted run leaves the previous
outputs as they were.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..data.io import read_lines
from ..exceptions import ConfigError, DataError
from ..util.files import output_target
from ..util.text import is_blank
from .common import (
    add_common,
    add_encoder,
    check_not_inputs,
    encoder_from_args,
    input_file,
    npy_output,
)
from .flags import examples

logger = logging.getLogger(__name__)


def add_parser(verbs) -> None:
    p = verbs.add_parser("encode", help="embed sentences (cached) into a .npy file",
                         description=__doc__, epilog=examples(
                             "disembed encode sentences.txt --encoder use-m3 --out vectors.npy"))
    p.add_argument("input", type=input_file, help="UTF-8 text file, one sentence per line")
    p.add_argument("--out", required=True, type=npy_output,
                   help="output .npy path (float32, one row per kept line); the kept sentences "
                        "go to the same path with .txt, usable as --encoder npy:OUT")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip empty lines (counted) instead of stopping at the first one")
    add_encoder(p)
    add_common(p)
    p.set_defaults(handler=handle)


def sentences_path(out: str, source: str) -> Path:
    """Where the kept sentences go (``OUT`` with ``.txt``): never over the input, never a
    pipe or device (the pair is renamed into place as one step)."""
    path = Path(out).with_suffix(".txt")
    if output_target(path).kind != "file":
        raise ConfigError(f"--out {out} would write its sentences to {path}, which is a pipe or "
                          "a device; the matrix and its sentences are renamed into place as "
                          "one step, so both must be regular files: choose another --out")
    if path.absolute() == Path(source).absolute() or (
            path.exists() and path.samefile(source)):
        raise ConfigError(
            f"--out {out} would write its sentences to {path}, which is the input file; "
            f"choose another --out (e.g. {Path(out).with_name(Path(out).stem + '.emb.npy')})")
    return path


def handle(args: argparse.Namespace) -> int:
    check_not_inputs(args.out, {"INPUT": args.input})
    texts_path = sentences_path(args.out, args.input)
    lines = read_lines(args.input)
    empty = [i + 1 for i, line in enumerate(lines) if is_blank(line)]
    if empty and not args.skip_bad_lines:
        raise DataError(f"{args.input}:{empty[0]}: empty line ({len(empty)} in all); remove "
                        "them or pass --skip-bad-lines")
    texts = [line for line in lines if not is_blank(line)]
    encoder = encoder_from_args(args)
    encoder.encode_to_file(texts, args.out, batch_size=args.batch_size, texts_path=texts_path)
    s = encoder.stats
    print(f"{len(texts)} sentences -> {args.out} ({encoder.dim}-d, {encoder.name}); "  # noqa: T201
          f"encoded {s.encoded}, {len(texts) - s.encoded} from cache"
          + (f"; skipped {len(empty)} empty lines" if empty else ""))
    return 0
