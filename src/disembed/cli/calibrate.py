"""``disembed calibrate --model M --language xx FILE``: add a language to a saved model from
unlabeled sentences of it (one per line), so that it is centred with its own mean instead
of the unseen-language fallback; ``export`` and ``serve`` then use it."""

from __future__ import annotations

import argparse

from ..data.io import read_lines
from ..saved_model import calibrate_saved
from .common import add_common, add_encoder, input_dir, input_file, output_dir
from .flags import examples
from .folders import add_overwrite


def add_parser(verbs) -> None:
    p = verbs.add_parser("calibrate", help="add a language to a saved model from unlabeled "
                         "sentences of it", description=__doc__, epilog=examples(
                             "disembed calibrate ja.txt --model models/seed-e5 --language ja "
                             "--out models/seed-e5-ja"))
    p.add_argument("file", type=input_file, metavar="FILE",
                   help="sentences of the language, one per line (a few hundred suffice: "
                        "docs/language_free.md)")
    p.add_argument("--model", required=True, type=input_dir,
                   help="a directory written by 'disembed train'")
    p.add_argument("--language", required=True,
                   help="the sentences' language: ISO 639-1/639-3 or BCP-47 (ja, jpn, ja-JP)")
    p.add_argument("--out", type=output_dir, default=None,
                   help="write the calibrated model here (default: update --model in place)")
    add_overwrite(p, "a model in --out")
    p.add_argument("--skip-language-check", action="store_true",
                   help="calibrate a language the model knows even where its language "
                        "identifier finds most sentences to be of another language")
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    saved = calibrate_saved(args.model, args.language, read_lines(args.file), out=args.out,
                            encoder=args.encoder, cache_dir=args.cache_dir,
                            batch_size=args.batch_size,
                            check_language=not args.skip_language_check)
    done = saved.disentangler.metadata_["calibrated"]
    print(f"calibrated {saved.disentangler.name}: {done} -> {saved.path}")  # noqa: T201
    return 0
