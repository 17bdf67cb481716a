"""Options shared by several verbs, and the helpers that turn them into API objects."""

from __future__ import annotations

import argparse
import logging
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any, Mapping

from ..encoders import DEFAULT_ENCODER, load_encoder
from ..encoders.cached import cached
from ..evaluation import EvalOptions
from ..exceptions import ConfigError, DataError
from ..experiment import TrainingData, Workspace
from ..experiment.tasks import check_task_options, flag_dest, option_flags
from ..mining.inputs import expand_inputs
from ..util.fields import arg_type
from ..util.files import is_standard_output, output_target
from .flags import ExtendCsv, add_deprecated

logger = logging.getLogger(__name__)


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("general")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="debug logging (and a traceback on unexpected errors)")
    group.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    group.add_argument("--no-progress", action="store_true", help="no progress bars")
    group.add_argument("--data-dir", default=None,
                       help="folder with tatoeba/, sts17/, wmt20_mlqe/, parallel/ "
                            "(default: $DISEMBED_DATA_DIR or ../shared/data)")
    group.add_argument("--cache-dir", type=cache_dir, default=None,
                       help="embedding cache (default: $DISEMBED_CACHE_DIR or ~/.cache/disembed)")


def add_workspace_options(parser: argparse.ArgumentParser) -> None:
    """``--batch-size`` and ``--cache-dtype`` for verbs without encoder options (their
    :class:`~disembed.experiment.Workspace` is then fully settable)."""
    group = parser.add_argument_group("workspace")
    group.add_argument("--batch-size", type=arg_type(Workspace, "batch_size"), default=64,
                       help="encoding batch size")
    group.add_argument("--cache-dtype", type=arg_type(Workspace, "cache_dtype"),
                       default="float32", help="how the embedding cache stores new vectors "
                       "(float32 or float16)")


SEED_HELP = "random seed: training-data order, initialisation, the evaluation subsample"
TASKS_HELP = "comma-separated tasks (tatoeba, sts17, wmt20-qe, bucc) or 'all'"
LANGUAGES_HELP = "comma-separated training languages, each paired with English"
ENCODER_SPECS = "e5-small, e5-small-c, use-m3, st:<name|path>, npy:<file.npy>, hash[:dim]"


def add_encoder(parser: argparse.ArgumentParser, default: str | None = DEFAULT_ENCODER) -> None:
    """``--encoder`` (one spec; ``default=None``: the saved model's encoder, else the
    default one), the st: options and the workspace options."""
    group = parser.add_argument_group("encoder")
    shown = default or f"the --model's own encoder, else {DEFAULT_ENCODER}"
    group.add_argument("--encoder", default=default,
                       help=f"encoder spec: {ENCODER_SPECS} (default: {shown})")
    group.add_argument("--pooling", default=None,
                       help="st: mean, cls, lasttoken or max (default: the model card's)")
    group.add_argument("--prefix", default=None,
                       help="st: text put before every sentence (default: the model card's, "
                            "else none)")
    group.add_argument("--max-length", type=positive_int, default=None,
                       help="st: token limit (default: the model's)")
    group.add_argument("--batch-size", type=arg_type(Workspace, "batch_size"), default=64,
                       help="encoding batch size")
    group.add_argument("--cache-dtype", type=arg_type(Workspace, "cache_dtype"),
                       default="float32", help="how the embedding cache stores new vectors "
                       "(float32 or float16)")


def add_encoders(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--encoder`` for verbs that run several encoders: repeatable and/or comma-separated
    (``args.encoder`` is a list); ``--encoders`` is its deprecated alias."""
    parser.add_argument("--encoder", dest="encoder", type=csv_list, action=ExtendCsv,
                        default=[DEFAULT_ENCODER], metavar="SPEC[,SPEC...]",
                        help=f"encoder specs, repeatable or comma-separated: {ENCODER_SPECS}")
    add_deprecated(parser, verb, "--encoders", "--encoder", dest="encoder", type=csv_list,
                   extend=True)


def encoder_options(args: argparse.Namespace, spec: str | None = None) -> dict:
    """The st: options given on the command line; other encoders take none, and giving
    one to them is an error rather than a silently ignored setting."""
    spec = spec or args.encoder or ""
    given = {k: v for k, v in (("pooling", args.pooling), ("prefix", args.prefix),
                               ("max_length", args.max_length)) if v is not None}
    if given and not spec.startswith("st:"):
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        named = f"the encoder here is {spec}" if spec else "no --encoder st:... was named"
        raise ConfigError(f"{flags} only apply to st: encoders and {named}: leave {flags} "
                          "out or name an st: encoder")
    return given


def encoder_from_args(args: argparse.Namespace, spec: str | None = None):
    """The encoder ``spec`` (default ``--encoder``, else the default encoder) behind the cache."""
    spec = spec or args.encoder or DEFAULT_ENCODER
    return cached(load_encoder(spec, **encoder_options(args, spec)), args.cache_dir,
                  args.cache_dtype)


def workspace_from_args(args: argparse.Namespace, **changes) -> Workspace:
    return Workspace(data_dir=args.data_dir, cache_dir=args.cache_dir,
                     cache_dtype=getattr(args, "cache_dtype", "float32"),
                     batch_size=getattr(args, "batch_size", 64), **changes)


def add_eval_options(parser: argparse.ArgumentParser, *, max_items_default: int | None,
                     task_defaults: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """``--max-eval-items`` and every task option that declares a flag (the task owns it:
    its name, help, choices and default; ``task_defaults`` overrides a default per verb)."""
    group = parser.add_argument_group("evaluation")
    group.add_argument("--max-eval-items", "--max-items", dest="max_eval_items",
                       type=items_or_all, default=max_items_default,
                       help="seeded subsample per language/track/pair, or 'all' for the "
                            f"published protocol (default: {max_items_default or 'all'})")
    for task, f in option_flags():
        default = (task_defaults or {}).get(task, {}).get(f.name, f.default)
        group.add_argument(f.metadata["flag"], dest=flag_dest(f), default=default,
                           choices=f.metadata.get("choices"),
                           help=f"{f.metadata.get('help', task)} (default: {default})")


def task_options_from_args(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Every task's own options given by its flags, by task name."""
    out: dict[str, dict[str, Any]] = {}
    for task, f in option_flags():
        out.setdefault(task, {})[f.name] = getattr(args, flag_dest(f))
    return out


def eval_options_from_args(args: argparse.Namespace) -> EvalOptions:
    return check_task_options(EvalOptions(max_items=args.max_eval_items, seed=args.seed,
                                          task_options=task_options_from_args(args)))


def add_training_path(parser: argparse.ArgumentParser) -> None:
    """How trained recipes run their steps (see :class:`disembed.training.TrainConfig`)."""
    group = parser.add_argument_group("training speed (trained methods)")
    group.add_argument("--no-deterministic", dest="deterministic", action="store_false",
                       default=None, help="allow faster steps that change the rounding "
                       "(runs are then not bit-reproducible)")
    group.add_argument("--speed", choices=("auto", "eager", "compiled"), default=None,
                       help="with --no-deterministic: torch.compile the loss where it measures "
                            "faster (auto, the default), always, or never")
    group.add_argument("--precision", choices=("auto", "float32", "bfloat16"), default=None,
                       help="with --no-deterministic: bfloat16 products where the CPU has "
                            "native bf16 (auto, the default), always, or never")


def training_path(args: argparse.Namespace) -> dict:
    """The training-path settings given on the command line (None values left out)."""
    return {k: v for k, v in (("deterministic", args.deterministic), ("speed", args.speed),
                              ("precision", args.precision)) if v is not None}


def csv_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def _int_at_least(text: str, minimum: int, expected: str) -> int:
    """``text`` as an integer >= ``minimum``, else an argparse error naming ``expected``."""
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0, "an integer >= 0")


#: items per subset, ``all`` for every item: what :class:`EvalOptions` declares
items_or_all = arg_type(EvalOptions, "max_items", noun="a number of items")
#: pairs per language, ``all`` for every pair: what :class:`TrainingData` declares
pairs_or_all = arg_type(TrainingData, "pairs_per_language",
                        noun="a number of pairs per language")


# --- argument types: every value is checked here, before any work starts ------------------

def finite_float(text: str) -> float:
    """A finite number (``nan`` and ``inf`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (e.g. a learning rate)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def seed(text: str) -> int:
    """A random seed: an integer in [0, 2**64 - 1] (what numpy and torch accept)."""
    value = _int_at_least(text, 0, "a seed, an integer >= 0")
    if value > 2**64 - 1:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, 2**64 - 1]; got {text!r}")
    return value


def _spool(source, label: str) -> str:
    """Copy a stream (stdin, a FIFO) into a temporary file, removed when disembed exits: the
    readers index files by byte offset and read them twice."""
    import atexit
    import shutil
    import tempfile

    with tempfile.NamedTemporaryFile("wb", prefix="disembed-input-", suffix=".txt",
                                     delete=False) as tmp:
        shutil.copyfileobj(source, tmp, 1 << 20)
    atexit.register(lambda: Path(tmp.name).unlink(missing_ok=True))
    logger.info("read %s into %s", label, tmp.name)
    return tmp.name


def input_files(text: str) -> str:
    """One input file (as :func:`input_file`), or several: a comma-separated list and/or
    shell globs (quoted), plain or ``.gz``; each is checked to exist."""
    if text == "-" or Path(text).is_file() and not text.endswith(".gz") or \
            not (any(ch in text for ch in ",*?[") or text.endswith(".gz")):
        return input_file(text)  # an existing file is read literally, never as a pattern

    try:
        expand_inputs(text)
    except DataError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _not_empty(text: str, what: str) -> None:
    """An empty path is the current folder to ``pathlib``: ``--model ""`` once scored raw
    vectors and ``--out ""`` wrote into the working folder; refuse it."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"empty path {text!r}; expected {what} (an unset "
                                         "shell variable?); leave the option out for its "
                                         "default")


def input_file(text: str) -> str:
    """An existing, readable file; ``-`` (standard input) and named pipes are read into a
    temporary file first."""
    _not_empty(text, "a file to read")
    if text == "-":  # given twice, the second one reads nothing (an empty input: refused)
        return _spool(sys.stdin.buffer, "standard input")
    path = Path(text)
    if path.exists() and stat.S_ISFIFO(path.stat().st_mode):
        with open(path, "rb") as fifo:
            return _spool(fifo, f"the pipe {text}")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; expected a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file; check the path")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: permission denied (not readable)")
    return text


def input_dir(text: str) -> str:
    """An existing directory (a saved model, a finished bench)."""
    _not_empty(text, "a directory (e.g. a model written by 'disembed train')")
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such directory; check the path")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; expected a directory")
    return text


def _check_parents(text: str) -> None:
    """No existing ancestor of ``text`` may be a file (missing folders are created)."""
    for parent in Path(text).absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} is a file, "
                                                 "not a directory")
            if not os.access(parent, os.W_OK):
                raise argparse.ArgumentTypeError(f"cannot write {text}: directory {parent} is "
                                                 "not writable")
            return


def output_file(text: str) -> str:
    """A file to write (missing parent folders are created); not an existing directory.
    ``-`` is standard output; a pipe or device is written in place and a symbolic link
    through to its target (:func:`disembed.util.files.output_target`). A path ending in
    ``/`` names a folder (``--out newdir/`` once wrote a file named ``newdir``): refused."""
    _not_empty(text, "a file path to write, or - for standard output")
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text} ends in '/', a folder; expected a file path, "
                                         f"e.g. {text}out.tsv")
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; expected a file path, e.g. "
                                         f"{Path(text) / 'out.tsv'}")
    try:
        where = output_target(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if where.kind == "file":
        _check_parents(str(where.path))
    return text


def npy_output(text: str) -> str:
    """An output file ending in ``.npy`` (its sentences go beside it as ``.txt``)."""
    if text != "-" and Path(text).suffix.lower() != ".npy":
        raise argparse.ArgumentTypeError(
            f"expected a path ending in .npy (the sentences are written beside it with "
            f".txt), got {text!r}")
    if text == "-" or output_target_kind(text) != "file":
        raise argparse.ArgumentTypeError(
            f"{text} is standard output, a pipe or a device, but encode writes two files as "
            "one step (the matrix and, beside it, its sentences): give a file path ending in "
            ".npy")
    return output_file(text)


def output_target_kind(text: str) -> str:
    """``file``, ``stream`` or ``stdout`` (an argparse error for a path never written)."""
    try:
        return output_target(text).kind
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def output_dir(text: str) -> str:
    """A directory to write into (created if missing); not an existing file, nor ``-``."""
    _not_empty(text, "a folder to write into")
    if text == "-":
        raise argparse.ArgumentTypeError("- (standard output) can take one file, but this "
                                         "option names a folder to write into: give a folder "
                                         "path")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; expected a directory (new or "
                                         "existing)")
    _check_parents(text)
    return text


def cache_dir(text: str) -> str:
    """The embedding cache folder: a directory or a path where one can be made."""
    return output_dir(text)


def say(args: argparse.Namespace, text: str) -> None:
    """A verb's summary line: on standard output, or on standard error when the verb's
    ``--out`` is standard output (``-``, ``/dev/stdout``), so the two never mix."""
    stream = sys.stderr if is_standard_output(getattr(args, "out", None)) else sys.stdout
    print(text, file=stream)  # noqa: T201 - the CLI's own output


def check_not_inputs(out: str, inputs: dict[str, str | None]) -> None:
    """Refuse an output path that is one of the inputs (it would be overwritten)."""
    for option, path in inputs.items():
        if path and Path(path).exists() and Path(out).exists() and \
                os.path.samefile(path, out):
            raise ConfigError(f"--out {out} is the input {option} {path}; writing there would "
                              "destroy the input: choose another --out")
