"""Folders disembed wrote, marked so that ``--overwrite`` replaces only those.

:func:`write_manifest` lists every file of a finished output folder in
``.disembed-manifest.json``. :func:`check_replaceable` allows replacing a folder only when
it is missing, empty, or holds exactly the files its manifest lists; anything else (no
manifest: the user's folder; files added since) is refused with the list of foreign files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..exceptions import ConfigError
from .files import atomic_write_text

MANIFEST = ".disembed-manifest.json"


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if not p.is_dir() and p.name != MANIFEST)


def write_manifest(folder: str | os.PathLike, writer: str) -> Path:
    """List the files of ``folder`` (written by ``writer``, e.g. ``"disembed export"``)."""
    folder = Path(folder)
    body = {"written_by": writer, "files": _files(folder)}
    return atomic_write_text(folder / MANIFEST, json.dumps(body, indent=1) + "\n")


def check_replaceable(folder: str | os.PathLike, option: str = "--out") -> None:
    """Raise :class:`ConfigError` unless ``folder`` may be deleted and written again."""
    folder = Path(folder)
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ConfigError(f"{option} {folder} is a file; --overwrite replaces only a folder "
                          "that disembed wrote. Choose another path")
    present = _files(folder)
    if not present and not (folder / MANIFEST).exists():
        return  # an empty folder
    try:
        listed = set(json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        listed = None
    if listed is None:
        foreign = present
        why = "it was not written by disembed (it has no readable manifest, " + MANIFEST + ")"
    else:
        foreign = [f for f in present if f not in listed]
        why = "it holds files disembed did not write there"
    if foreign:
        shown = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more"
                                           if len(foreign) > 10 else "")
        raise ConfigError(f"--overwrite refuses to replace {folder}: {why}: {shown}. Move "
                          f"those files away or choose another {option}")


__all__ = ["MANIFEST", "check_replaceable", "write_manifest"]
