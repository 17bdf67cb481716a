"""``disembed mine SRC TGT``: mine translation pairs from two sentence files (margin k-NN)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..encoders import DEFAULT_ENCODER
from ..encoders.cached import cached
from ..exceptions import ConfigError
from ..mining import BACKENDS, MARGINS, MODES, MineConfig, mine_files, write_pairs
from ..mining.distributed import connect, mine_distributed
from ..saved_model import SavedModel
from ..util.files import output_target
from .common import (
    add_common,
    add_encoder,
    check_not_inputs,
    encoder_from_args,
    encoder_options,
    finite_float,
    input_dir,
    input_files,
    output_dir,
    output_file,
    positive_int,
    say,
)
from .flags import add_deprecated, examples

INPUT_FORMATS = ("auto", "text", "tsv")

logger = logging.getLogger(__name__)


def add_model_options(g, first: str = "first file", second: str = "second file") -> None:
    """``--model`` and the two sides' languages: mine, search and score take them alike."""
    g.add_argument("--model", type=input_dir, default=None,
                   help="a saved disentangler folder: use its meaning part instead of raw "
                        "embeddings; the language of each sentence is identified by the "
                        "model unless --src-lang/--tgt-lang name it (default: none, raw "
                        "embeddings)")
    g.add_argument("--src-lang", default=None,
                   help=f"with --model: the language of the {first}, e.g. de, or only its "
                        "script, e.g. und-Hani (default: identified sentence by sentence, "
                        "among the training languages that write the sentence's script)")
    g.add_argument("--tgt-lang", default=None,
                   help=f"with --model: the language of the {second}, e.g. en, or und-Hani "
                        "(default: identified sentence by sentence, as --src-lang)")


def add_input_options(p: argparse.ArgumentParser, verb: str) -> None:
    g = p.add_argument_group("inputs")
    g.add_argument("--input-format", choices=INPUT_FORMATS, default="auto",
                   help="one sentence per line (text) or id<TAB>sentence (tsv); auto: tsv when "
                        "the first line has a tab")
    add_deprecated(g, verb, "--format", "--input-format", dest="input_format",
                   type=input_format)
    g.add_argument("--skip-bad-lines", action="store_true",
                   help="skip empty/undecodable lines (counted) instead of stopping")
    add_model_options(g)
    g.add_argument("--run-dir", type=output_dir, default=None,
                   help="where the embedded matrices go (resumable; default: OUT.run/)")
    g.add_argument("--overwrite", action="store_true",
                   help="use a --run-dir that disembed did not write (refused otherwise)")
    g.add_argument("--chunk", type=positive_int, default=16384,
                   help="sentences per resumable chunk")
    g.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="k-NN backend. auto (default): exact up to 200k x 200k sentences; above, "
                        "both paths are timed on a sample and the cheaper runs (approx: faiss "
                        "IVF, nprobe chosen for --recall); exact: always exact; "
                        "approx-pq: IVF-PQ codes (less memory), re-scored exactly")
    g.add_argument("--recall", type=unit_interval, default=0.98,
                   help="approx backends: recall@k of the neighbour lists against exact search, "
                        "measured on 1000 sampled queries, that picks nprobe (default 0.98: "
                        "BUCC F1 within 0.13 of exact; 0.95 lost up to 0.6)")


def input_format(text: str) -> str:
    if text not in INPUT_FORMATS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(INPUT_FORMATS)}; got "
                                         f"{text!r}")
    return text


def model_and_encoder(args: argparse.Namespace):
    """The saved model (or ``None``) and the encoder behind the cache: ``--encoder``, else
    the model's own (checked to be the one it was trained on, by
    :class:`~disembed.saved_model.SavedModel`), else the default."""
    if not args.model:
        return None, encoder_from_args(args)
    saved = SavedModel.load(args.model, args.encoder, encoder_options(args))
    encoder, model = saved
    return model, cached(encoder, args.cache_dir, args.cache_dtype)


def unit_interval(text: str) -> float:
    value = finite_float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], e.g. 0.95; got {text}")
    return value


def backend_options(args: argparse.Namespace) -> dict:
    """The recall target reaches the approximate backends (``auto`` may choose one)."""
    return {"recall": args.recall} if args.backend in ("auto", "approx", "approx-pq") else {}


def run_dir(args: argparse.Namespace) -> Path:
    """``--run-dir``, else ``OUT.run`` beside a file ``--out``; an ``--out`` that is standard
    output, a pipe or a device has no folder beside it: a temporary one (removed at exit,
    so such a run does not resume)."""
    if args.run_dir:
        return Path(args.run_dir)
    if output_target(args.out).kind == "file":
        return Path(str(args.out) + ".run")
    if getattr(args, "_temporary_run_dir", None) is None:
        import atexit
        import shutil
        import tempfile

        args._temporary_run_dir = tempfile.mkdtemp(prefix="disembed-run-")
        atexit.register(shutil.rmtree, args._temporary_run_dir, True)
        logger.info("--out %s is not a file: the embedded matrices go to %s (removed at exit; "
                    "give --run-dir to keep them and resume)", args.out,
                    args._temporary_run_dir)
    return Path(args._temporary_run_dir)


def add_parser(verbs) -> None:
    p = verbs.add_parser("mine", help="mine translation pairs from two sentence files",
                         description=__doc__, epilog=examples(
                             "disembed mine de.txt en.txt --model models/seed-e5 "
                             "--out mined.tsv --threshold 1.06"))
    p.add_argument("src", type=input_files,
                   help="source sentences: one per line, or id<TAB>sentence; several files as "
                        "a comma-separated list or a quoted glob ('de-*.txt.gz'), plain or .gz")
    p.add_argument("tgt", type=input_files, help="target sentences, same formats")
    p.add_argument("--out", required=True, type=output_file,
                   help="output TSV: score src tgt src_id tgt_id")
    g = p.add_argument_group("mining")
    g.add_argument("-k", type=positive_int, default=4, help="neighbours for the margin (default 4)")
    g.add_argument("--margin", choices=MARGINS, default="ratio",
                   help="margin score of Artetxe & Schwenk (2019): the cosine over (ratio) "
                        "or minus (distance) the mean cosine of the k nearest neighbours, or "
                        "the plain cosine (absolute)")
    g.add_argument("--mode", choices=MODES, default="max-score",
                   help="candidates: each source's best target (forward), each target's "
                        "best source (backward), pairs found both ways (intersection), or "
                        "both ways merged one-to-one, best first (max-score)")
    g.add_argument("--threshold", type=finite_float, default=None,
                   help="keep pairs scoring >= this (default: keep all)")
    g.add_argument("--top", type=positive_int, default=None,
                   help="keep at most this many pairs, >= 1 (default: keep all)")
    g.add_argument("--center", choices=("none", "corpus"), default="none",
                   help="corpus: subtract each file's own mean before the search "
                        "(transductive: a sentence's vector then depends on its file)")
    add_input_options(p, "mine")
    g = p.add_argument_group("cluster (Ray; pip install 'disembed[ray]')")
    g.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="run as tasks on a Ray cluster: local (one worker slot per CPU), "
                        "local:N, auto (the cluster this node belongs to) or ray://host:port; "
                        "inputs, run folder and cache must be on storage every node reads "
                        "(default: none, one process)")
    g.add_argument("--shard-rows", type=positive_int, default=100_000,
                   help="--cluster: sentences per shard (one encode task; shard pairs are the "
                        "search tasks)")
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def mine_on_cluster(args: argparse.Namespace, config: MineConfig):
    """``mine --cluster``: the same inputs, settings and TSV, as tasks on Ray."""

    if args.model:  # the workers open exactly the encoder the model was saved with
        saved = SavedModel.load(args.model, args.encoder, encoder_options(args))
        spec, options = saved.encoder_spec, saved.encoder_spec_options
    else:
        spec = args.encoder or DEFAULT_ENCODER
        options = encoder_options(args, spec)
    mined, src, tgt = mine_distributed(
        args.src, args.tgt, spec, run_dir=run_dir(args), config=config,
        shard_rows=args.shard_rows, cache_dir=args.cache_dir, cache_dtype=args.cache_dtype,
        encoder_options=options, model_dir=args.model,
        src_lang=args.src_lang, tgt_lang=args.tgt_lang, format=args.input_format,
        skip_bad=args.skip_bad_lines, batch_size=args.batch_size,
        executor=connect(args.cluster))
    mined.written = write_pairs(args.out, mined, src, tgt)
    return mined


def handle(args: argparse.Namespace) -> int:
    config = MineConfig(k=args.k, margin=args.margin, mode=args.mode, threshold=args.threshold,
                        top=args.top, backend=args.backend, chunk=args.chunk,
                        backend_options=backend_options(args))
    check_not_inputs(args.out, {"SRC": args.src, "TGT": args.tgt})
    if args.cluster:
        if args.center != "none":
            raise ConfigError("--center corpus is not available with --cluster (it needs each "
                              "whole file in one process); leave one of them out")
        say(args, summary(mine_on_cluster(args, config), args))
        return 0
    model, encoder = model_and_encoder(args)
    mined = mine_files(args.src, args.tgt, encoder, args.out,
                       run_dir=run_dir(args), config=config, model=model,
                       src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                       format=args.input_format, skip_bad=args.skip_bad_lines,
                       batch_size=args.batch_size, center=args.center)
    say(args, summary(mined, args))
    return 0


def summary(mined, args: argparse.Namespace) -> str:
    """What was written, with every number as it was used (not as it was asked for)."""
    written = len(mined) if mined.written is None else mined.written
    dropped = len(mined) - written
    used = mined.k or args.k  # 0: not recorded (the cluster path)
    k = f"k={used} (-k {args.k} clamped to the smaller side)" if used < args.k else f"k={used}"
    extra = f"; {dropped} repeated sentence pairs not written" if dropped else ""
    return (f"{written} pairs -> {args.out} ({args.mode}, {args.margin} margin, {k}, "
            f"{mined.backend or args.backend}; k-NN {mined.seconds['knn']:.1f}s{extra})")
