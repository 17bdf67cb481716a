"""Small text helpers."""

from __future__ import annotations

import re


def slug(text: str, max_length: int = 60) -> str:
    """``text`` as a file-name-safe slug: runs of other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:max_length]
