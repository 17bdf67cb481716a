"""``disembed export --model DIR --out FOLDER``: a trained model as a sentence-transformers model.

The folder holds the model's base encoder (e5-small with its bundled weights, or the
st: model it was trained on) followed by the meaning part, loads with plain
``SentenceTransformer(FOLDER)`` and returns the meaning embedding. Recipes whose
meaning part depends on the language identify it per text inside the folder (load with
``trust_remote_code=True``; ``encode(texts, language="de")`` says it). A model card
(README.md) describes it.
"""

from __future__ import annotations

import argparse

from ..serving.export import export_model
from .common import add_common, output_dir
from .flags import examples


def add_parser(verbs) -> None:
    p = verbs.add_parser("export", help="export a trained model as a sentence-transformers model",
                         description=__doc__, epilog=examples(
                             "disembed export --model models/seed-e5 --out exported/seed-e5"))
    p.add_argument("--model", required=True, help="a directory written by 'disembed train'")
    p.add_argument("--out", required=True, type=output_dir, help="the folder to create")
    p.add_argument("--scores", default=None,
                   help="a result JSON ('disembed evaluate --out') for the model card's scores "
                        "(default: MODEL/../result.json when it exists)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    add_common(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    result = export_model(args.model, args.out, scores=args.scores, overwrite=args.overwrite)
    how = (f'SentenceTransformer("{result.path}").encode(texts, task=LANG) with LANG in '
           f"{', '.join(result.routes)}" if result.by_language
           else f'SentenceTransformer("{result.path}").encode(texts)')
    if result.identifies_language:
        how = (f'SentenceTransformer("{result.path}", trust_remote_code=True).encode(texts) '
               "(the language is identified per text; language=LANG to say it, LANG in "
               f"{', '.join(r for r in result.routes if r != 'global')})")
    print(f"{result.method} -> {result.path} ({result.dim}-d meaning part); load it with "  # noqa: T201
          f"{how}")
    return 0
