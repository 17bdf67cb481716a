"""A content digest of the evaluation data a set of tasks reads.

A finished run is reused only when the files its tasks read are byte for byte the ones it
was scored on: :func:`evaluation_data_digest` hashes (blake2b) the relative path, size and
bytes of every file under each task's data folder (``TaskMetadata.data_folder``). Within
one process, a file whose path, inode, size and modification time are unchanged is not
read twice (a bench checks every run against the same folders).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

from ..data.paths import resolve_data_dir
from . import TASKS

_FILE_DIGESTS: dict[tuple, bytes] = {}


def _file_digest(path: Path) -> bytes:
    st = path.stat()
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _FILE_DIGESTS:
        h = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        _FILE_DIGESTS[key] = h.digest()
    return _FILE_DIGESTS[key]


def evaluation_data_digest(tasks: Sequence[str], data_dir: str | os.PathLike | None = None
                           ) -> str:
    """Hex digest of every file the tasks ``tasks`` (registry names) read from
    ``data_dir`` (resolved as the tasks resolve it); ``""`` for no tasks."""

    if not tasks:
        return ""
    root = resolve_data_dir(data_dir)
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(set(tasks)):
        folder = root / TASKS.get(name).metadata.data_folder
        h.update(f"task {name}\0".encode())
        files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        for path in files:
            rel = path.relative_to(folder).as_posix()
            h.update(f"{rel}\0{path.stat().st_size}\0".encode("utf-8", "surrogateescape"))
            h.update(_file_digest(path))
    return h.hexdigest()


__all__ = ["evaluation_data_digest"]
