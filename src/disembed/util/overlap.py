"""Outputs never touch what the user owns: every output path checked against every input.

A command names its inputs (files it reads; folders it reads from: a model, the data
folder, the embedding cache, a finished bench) and its outputs (files it writes; folders it
writes into; a folder it *replaces*, as ``export`` does). :func:`check_outputs` resolves
them all (symbolic links and ``..`` included) and refuses, before any work:

* an output file that is an input file, or lies inside an input folder
  (``evaluate --model M --out M/config.json``, ``--out DATA/sts17/en-de.tsv``);
* an output folder that is an input folder or lies inside one;
* a folder to be replaced that holds an input (``export --model D --out D``, or ``--out``
  the model's parent);
* two outputs that are one path (``mine --out X --run-dir X``).

Only the paths are compared; nothing is read or written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal

from ..exceptions import ConfigError

Kind = Literal["file", "dir", "replaced-dir"]


@dataclass(frozen=True)
class Endpoint:
    """One input or output: the option that named it, its path, what it is."""

    option: str
    path: str | os.PathLike
    kind: Kind = "file"

    @property
    def resolved(self) -> Path:
        return Path(os.path.abspath(os.path.realpath(os.path.expanduser(self.path))))


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or child.is_relative_to(parent)


def _problem(out: Endpoint, inp: Endpoint) -> str | None:
    o, i = out.resolved, inp.resolved
    named = f"{inp.option} {inp.path}"
    if inp.kind == "file":
        if out.kind == "replaced-dir" and _inside(i, o):
            return f"holds the input {named}: replacing the folder would delete it"
        return None  # the same file: reported by check_outputs in every verb's old words
    if _inside(o, i):
        where = "is" if o == i else "lies inside"
        return (f"{where} the input folder {named}: writing there would change or destroy "
                "what it holds")
    if out.kind == "replaced-dir" and _inside(i, o):
        return f"holds the input folder {named}: replacing the folder would delete it"
    return None


def check_outputs(outputs: Iterable[Endpoint], inputs: Iterable[Endpoint]) -> None:
    """Raise :class:`ConfigError` for the first output that overlaps an input (see the
    module docstring)."""
    inputs = [i for i in inputs if i.path]
    outputs = [o for o in outputs if o.path]
    for i, out in enumerate(outputs):  # two outputs of one command are two paths
        same = next((o for o in outputs[i + 1:] if o.resolved == out.resolved), None)
        if same is not None:
            raise ConfigError(f"{out.option} {out.path} and {same.option} {same.path} are the "
                              "same path, but one command writes both: give each its own")
    for out in outputs:
        if not out.path:
            continue
        for inp in inputs:
            if inp.kind == "file" and out.resolved == inp.resolved:
                raise ConfigError(f"{out.option} {out.path} is the input {inp.option} "
                                  f"{inp.path}; writing there would destroy the input: "
                                  f"choose another {out.option}")
            why = _problem(out, inp)
            if why:
                raise ConfigError(
                    f"{out.option} {out.path} {why}; choose an {out.option} outside every "
                    "input (the model, data and cache folders and the input files)")


__all__ = ["Endpoint", "check_outputs"]
