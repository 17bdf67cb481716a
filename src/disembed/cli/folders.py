"""Every verb that writes a folder checks it before any work (:mod:`disembed.util.folders`):
not the user's own folder, not a finished result it would replace, unless ``--overwrite``."""

from __future__ import annotations

import argparse

from ..util.folders import check_output_folder

MODEL_FILES = ("config.json", "model.safetensors")
#: verb -> (the option naming its folder, the files of a finished result it would replace)
FOLDERS = {
    "train": ("out", MODEL_FILES),
    "calibrate": ("out", MODEL_FILES),
    "bench": ("out", ()),
    "analyse": ("out", ()),
    "tune": ("out", ()),
    "scale": ("out", ()),
    "mine": ("run_dir", ()),
    "search": ("run_dir", ()),
}


def add_overwrite(parser: argparse.ArgumentParser, what: str) -> None:
    """``--overwrite``: write into a folder disembed did not write, or replace ``what``."""
    parser.add_argument("--overwrite", action="store_true",
                        help=f"write into a folder disembed did not write, or replace {what} "
                             "(refused otherwise)")


def check_folders(args: argparse.Namespace) -> None:
    """Raise :class:`~disembed.exceptions.ConfigError` for a folder this command must not
    write into (see :mod:`disembed.util.folders`)."""
    if args.verb not in FOLDERS:
        return
    name, finished = FOLDERS[args.verb]
    folder = getattr(args, name, None)
    if isinstance(folder, str) and folder:
        check_output_folder(folder, verb=f"disembed {args.verb}",
                            option="--" + name.replace("_", "-"),
                            overwrite=bool(getattr(args, "overwrite", False)),
                            finished=finished, finished_what="a trained model" if finished
                            else "a finished result")


__all__ = ["FOLDERS", "add_overwrite", "check_folders"]
