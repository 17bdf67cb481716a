"""Output folders: disembed writes into a folder it made (or an empty one), never into the
user's own folder unless told ``--overwrite``.

A folder disembed writes into is *marked*: every writer of a run folder holds its lock file
``.disembed.lock`` (:mod:`.locks`), which stays after the run; the top folder of a report
(``bench``, ``tune``, ``scale``, ``analyse``) is marked by :func:`mark_folder`; an export
holds its manifest (:mod:`.manifest`). :func:`check_output_folder` runs before any work and
refuses

* a folder that holds files but no mark (the user's folder: ``train --out ~/thesis``);
* a folder that holds a finished result that the verb would replace (``train --out M``
  where ``M`` holds a trained model), so a second run never silently replaces the first;

unless ``overwrite`` is given. A rerun of a killed verb finds its own mark and resumes.
Only paths are read; nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ..exceptions import ConfigError
from .locks import LOCK_NAME
from .manifest import MANIFEST

#: files whose presence marks a folder as written by disembed
MARKS = (LOCK_NAME, MANIFEST)


def is_marked(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` carries disembed's mark (module docstring)."""
    return any((Path(folder) / mark).is_file() for mark in MARKS)


def mark_folder(folder: str | os.PathLike) -> Path:
    """Create ``folder`` (if missing) and mark it as written by disembed."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / LOCK_NAME).touch(exist_ok=True)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(folder)
        raise
    return folder


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def check_output_folder(folder: str | os.PathLike, *, verb: str, option: str = "--out",
                        overwrite: bool = False, finished: Sequence[str] = (),
                        finished_what: str = "a finished result") -> None:
    """Refuse (``ConfigError``) to write into ``folder`` when it is not disembed's or holds
    ``finished`` files, unless ``overwrite`` (module docstring)."""
    folder = Path(folder)
    if overwrite or not folder.is_dir():
        return
    present = sorted(p.name for p in folder.iterdir())
    done = [name for name in finished if (folder / name).exists()]
    if done:
        raise ConfigError(
            f"{option} {folder} already holds {finished_what} ({_shown(done)}); {verb} would "
            f"replace it. Choose another {option}, or pass --overwrite to replace it")
    if present and not is_marked(folder):
        raise ConfigError(
            f"{option} {folder} is a folder disembed did not write (it holds {_shown(present)} "
            f"and no {LOCK_NAME}); {verb} would write its files among them. Choose a new or "
            f"empty folder, or pass --overwrite to write into it anyway (an older disembed's "
            "output folder: --overwrite, and its finished runs are reused)")


__all__ = ["MARKS", "check_output_folder", "is_marked", "mark_folder"]
