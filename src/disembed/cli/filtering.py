"""``disembed filter BITEXT [TGT]``: drop the bad pairs of a crawled bitext.

Each pair is checked by hard rules (copy, no letters, length ratio, numbers or URLs that
differ), by the language of each side (the --model's own identifier, or langid) and by a
calibrated meaning score (the ratio margin of the meaning cosine among the pairs' chunk).
Writes the kept pairs (--out) and every pair's scores with the reason it was dropped
(--scores-out). Streams in chunks; a killed run resumes from its run folder. See
docs/filtering.md.
"""

from __future__ import annotations

import argparse
import logging

from ..filtering import (
    CHECKS,
    DEFAULT_EXPECTED,
    DEFAULT_THRESHOLD,
    FilterConfig,
    PairScorer,
    RuleConfig,
    filter_bitext,
    make_check,
)
from ..filtering.cluster import ScorerSpec
from ..filtering.dev import threshold_from_dev
from ..mining.distributed import connect
from .common import (
    add_common,
    add_encoder,
    check_not_inputs,
    finite_float,
    input_file,
    output_file,
    positive_int,
    say,
)
from .flags import examples
from .mine import add_model_options, model_and_encoder, unit_interval

logger = logging.getLogger(__name__)


def weight(text: str) -> float:
    """A finite number >= 0 (``--length-coverage``: 0 switches the term off)."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 (0: off), got {text!r}")
    return value


def length_ratio(text: str) -> float:
    """A finite number above 1 (``--max-length-ratio``: the longer side over the shorter)."""
    value = finite_float(text)
    if not value > 1:
        raise argparse.ArgumentTypeError(
            f"expected a number above 1 (the longer side's length over the shorter's, e.g. "
            f"3), got {text!r}")
    return value


def add_parser(verbs) -> None:
    p = verbs.add_parser("filter", help="filter a bitext: rules, languages, meaning score",
                         description=__doc__, epilog=examples(
                             "disembed filter crawl.tsv.gz --model models/seed-e5 "
                             "--src-lang de --tgt-lang en --out kept.tsv",
                             "disembed filter crawl.de crawl.en --model models/seed-e5 "
                             "--dev labelled.tsv --out kept.tsv",
                             "disembed filter crawl.tsv --no-header --model models/seed-e5 "
                             "--keep-top 0.5 --out kept.tsv"))
    p.add_argument("inputs", type=input_file, nargs="+", metavar="BITEXT",
                   help="a TSV (with a header naming --src-col/--tgt-col, or without one: "
                        "the first two columns), or two line-aligned files; .gz or - (stdin)")
    p.add_argument("--out", required=True, type=output_file,
                   help="the kept pairs, src<TAB>tgt per line")
    p.add_argument("--scores-out", type=output_file, default=None,
                   help="every pair's scores, languages and drop reason (default: OUT with "
                        ".scores.tsv added)")
    p.add_argument("--run-dir", default=None,
                   help="folder of the chunk parts a killed run resumes from (default: "
                        "OUT.run)")
    g = add_bitext_options(p)
    g.add_argument("--chunk-size", type=positive_int, default=10000,
                   help="pairs scored together (the margin's neighbours; default 10000)")
    j = p.add_argument_group("decision")
    j.add_argument("--threshold", type=finite_float, default=None,
                   help=f"keep pairs whose score is at least this (default "
                        f"{DEFAULT_THRESHOLD}, chosen on validation data; docs/filtering.md)")
    j.add_argument("--keep-top", type=unit_interval, default=None,
                   help="keep at most this fraction of all pairs, the best scored (default: "
                        "none, the threshold alone)")
    j.add_argument("--dev", type=input_file, default=None,
                   help="labelled TSV (src, tgt, label 1/0): choose the threshold there and "
                        "print precision and recall at each candidate (default: none, "
                        "the --threshold)")
    j.add_argument("--language-check", choices=("auto", *CHECKS, "none"), default="auto",
                   help="who identifies each side's language: the model's identifier, "
                        "langid, or none (auto: the model's where --model has one, else "
                        "langid)")
    j.add_argument("--max-length-ratio", type=length_ratio, default=2.0,
                   help="drop pairs whose longer side is more than this times the shorter")
    j.add_argument("--length-coverage", type=weight, default=RuleConfig.coverage_weight,
                   metavar="WEIGHT",
                   help="weight of the length-coverage penalty on the score (a target much "
                        "shorter or longer than its language pair's usual ratio, e.g. a "
                        "partial translation; docs/filtering.md); 0: the margin alone")
    j.add_argument("-k", type=positive_int, default=4, help="neighbours for the margin")
    g = p.add_argument_group("cluster (Ray; pip install 'disembed[ray]')")
    g.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="score the chunks as tasks on a Ray cluster: local, local:N, auto or "
                        "ray://host:port (default: none, in this process); same outputs")
    add_model_options(p.add_argument_group("meaning part"), "source side", "target side")
    add_encoder(p, default=None)
    add_common(p)
    p.set_defaults(handler=handle)


def add_bitext_options(p: argparse.ArgumentParser):
    """The options of a bitext input (:func:`~disembed.data.bitext.read_bitext`), shared by
    ``filter`` and ``score``; returns their group."""
    g = p.add_argument_group("input")
    g.add_argument("--header", choices=("auto", "yes", "no"), default="auto",
                   help="whether the TSV's first row names the columns (auto: when it holds "
                        "--src-col and --tgt-col)")
    g.add_argument("--no-header", dest="header", action="store_const", const="no",
                   help="the TSV has no header row (same as --header no)")
    g.add_argument("--src-col", default="src",
                   help="source column: a header name, or a number (1-based) without header")
    g.add_argument("--tgt-col", default="tgt", help="target column (as --src-col)")
    g.add_argument("--skip-bad-lines", action="store_true",
                   help="skip undecodable, short or empty rows (logged) instead of stopping")
    return g


def check_bitext_inputs(inputs: list[str]) -> None:
    """One TSV or two line-aligned files (argparse's ``nargs="+"`` takes any number)."""
    if len(inputs) > 2:
        raise argparse.ArgumentTypeError("give one TSV or two line-aligned files")


def _choose_on_dev(args: argparse.Namespace, scorer: PairScorer) -> float:
    choice = threshold_from_dev(args.dev, scorer, src_lang=args.src_lang,
                                tgt_lang=args.tgt_lang)
    say(args, f"threshold candidates on {args.dev} (precision / recall of 'keep'):")
    say(args, "  threshold  precision  recall    f1     kept")
    for c in choice.table():
        mark = "  <- chosen" if c == choice.chosen else ""
        say(args, f"  {c.threshold:9.4f}  {c.precision:9.3f}  {c.recall:6.3f}  {c.f1:6.3f}  "
                  f"{c.kept:6d}{mark}")
    return choice.threshold


def handle(args: argparse.Namespace) -> int:
    check_bitext_inputs(args.inputs)
    scores_out = args.scores_out or f"{args.out}.scores.tsv"
    for out in (args.out, scores_out):
        check_not_inputs(out, {f"BITEXT {i + 1}": f for i, f in enumerate(args.inputs)})
    model, encoder = model_and_encoder(args)
    languages = [x for x in (args.src_lang, args.tgt_lang) if x]
    scorer = PairScorer(encoder, model,
                        make_check(args.language_check, model, languages or None),
                        rules=RuleConfig(max_ratio=args.max_length_ratio,
                                         coverage_weight=args.length_coverage), k=args.k,
                        batch_size=args.batch_size)
    threshold = _choose_on_dev(args, scorer) if args.dev else args.threshold
    config = FilterConfig(threshold=threshold, keep_top=args.keep_top, src_lang=args.src_lang,
                          tgt_lang=args.tgt_lang, chunk_size=args.chunk_size, k=args.k,
                          rules=scorer.rules, header=args.header, src_col=args.src_col,
                          tgt_col=args.tgt_col, skip_bad=args.skip_bad_lines)
    cluster = {}
    if args.cluster:
        cluster = {"executor": connect(args.cluster), "spec": ScorerSpec(
            model=args.model, encoder=args.encoder, check=args.language_check,
            languages=tuple(languages), rules=scorer.rules, k=args.k,
            batch_size=args.batch_size, cache_dir=args.cache_dir)}
    report = filter_bitext(args.inputs, args.out, scorer, config, scores_out=scores_out,
                           run_dir=args.run_dir, **cluster)
    if threshold is None and args.keep_top is None:
        say(args, f"default threshold {DEFAULT_THRESHOLD}: expected precision "
                  f"{DEFAULT_EXPECTED['precision']}, recall {DEFAULT_EXPECTED['recall']} "
                  f"({DEFAULT_EXPECTED['measured_on']}); choose your own with --dev")
    resumed = f", {report.resumed} chunk(s) resumed" if report.resumed else ""
    langs = "-".join(x or "?" for x in report.languages) if scorer.check else "not checked"
    say(args, f"kept {report.kept} of {report.pairs} pairs (threshold "
              f"{report.threshold:.4f}, languages {langs}{resumed}) -> {args.out}; scores -> "
              f"{scores_out}")
    dropped = ", ".join(f"{k} {v}" for k, v in report.reasons.items()) or "none"
    say(args, f"dropped: {dropped}")
    return 0
