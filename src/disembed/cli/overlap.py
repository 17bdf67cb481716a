"""Every verb's outputs checked against every input it reads, before the handler runs.

The arguments name the paths: input files (``INPUT``, ``SRC``, ``--pairs``, ``--src-pool``
...), input folders (``--model``, ``--bench``, the data sets of the data folder, the
embedding cache) and outputs (``--out``, ``--run-dir``).
:func:`disembed.util.overlap.check_outputs` refuses any overlap with exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..data.download import load_catalog
from ..data.paths import resolve_data_dir
from ..exceptions import ConfigError
from ..util.cache_dir import default_cache_dir
from ..util.overlap import Endpoint, check_outputs
from .arg_checks import check_values

#: argument -> how messages name it, for the input files of every verb
_FILES = {"input": "INPUT", "src": "SRC", "tgt": "TGT", "queries": "QUERIES",
          "database": "DATABASE", "src_pool": "--src-pool", "tgt_pool": "--tgt-pool",
          "scores": "--scores"}
#: verbs whose --out is a folder they write into (export replaces its --out)
_DIR_OUT = {"train", "bench", "analyse", "tune", "scale", "prepare"}


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value] if value else []


def _data_sets(data_dir: str | None) -> list[Path]:
    """The folders of the data sets (tatoeba/, sts17/, parallel/ ...) in the data folder."""
    try:
        root = resolve_data_dir(data_dir)
    except ConfigError:
        return []
    cat = load_catalog()
    entries = [*cat.get("sets", {}).values(), *cat.get("manual", {}).values()]
    tops = sorted({str(e["folder"]).split("/")[0] for e in entries if "folder" in e})
    return [root / top for top in tops if (root / top).is_dir()]


def _inputs(args: argparse.Namespace) -> list[Endpoint]:
    found = [Endpoint(label, getattr(args, name)) for name, label in _FILES.items()
             if isinstance(getattr(args, name, None), str)]
    pairs = getattr(args, "pairs", None)
    if isinstance(pairs, str):
        found.append(Endpoint("PAIRS" if args.verb == "score" else "--pairs", pairs))
    found += [Endpoint("--model", m, "dir") for m in _as_list(getattr(args, "model", None))
              if isinstance(m, str)]
    if isinstance(getattr(args, "bench", None), str):
        found.append(Endpoint("--bench", args.bench, "dir"))
    if hasattr(args, "data_dir"):
        found += [Endpoint("(a data set)", p, "dir") for p in _data_sets(args.data_dir)]
    if hasattr(args, "cache_dir"):
        found.append(Endpoint("(the embedding cache)", args.cache_dir or default_cache_dir(),
                              "dir"))
    return found


def _outputs(args: argparse.Namespace) -> list[Endpoint]:
    out = getattr(args, "out", None)
    found = []
    if isinstance(out, str) and out != "-":  # - is standard output
        kind = ("replaced-dir" if args.verb == "export"
                else "dir" if args.verb in _DIR_OUT else "file")
        found.append(Endpoint("--out", out, kind))  # encode checks its .txt sentences itself
    if isinstance(getattr(args, "run_dir", None), str):
        found.append(Endpoint("--run-dir", args.run_dir, "dir"))
    return found


def check_args(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` when an output of this command overlaps one of its inputs,
    or an argument the parser lets through is empty or names one column twice
    (:func:`.arg_checks.check_values`)."""
    check_values(args)
    if args.verb in ("serve", "info", "data"):
        return
    check_outputs(_outputs(args), _inputs(args))


def written_paths(args: argparse.Namespace) -> list[str]:
    """What this command writes (its outputs and the embedding cache), named in an error
    where the system does not say which file it could not write."""
    try:
        found = [str(e.path) for e in _outputs(args)]
        if hasattr(args, "cache_dir"):
            found.append(f"the embedding cache {args.cache_dir or default_cache_dir()}")
    except Exception:  # noqa: BLE001 - only a better message is at stake
        return []
    return found


__all__ = ["check_args", "written_paths"]
