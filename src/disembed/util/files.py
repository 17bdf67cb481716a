"""Atomic writes and content hashes of files."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Iterable


def atomic_write_bytes(path: str | os.PathLike, chunks: Iterable[bytes]) -> Path:
    """Write ``chunks`` to ``path`` so readers see either the old file or the whole new one.

    The bytes go to a temporary file in the same directory, are flushed and fsynced,
    and the file is renamed over ``path``; on any error the temporary file is removed
    and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, [text.encode("utf-8")])


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20, length: int = 16) -> str:
    """sha256 of a file's bytes, the first ``length`` hex characters (streamed, bounded memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()[:length]
