"""Where disembed keeps what it computes once per machine: embeddings, the hardware probe."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV_VAR = "DISEMBED_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$DISEMBED_CACHE_DIR``, else ``$XDG_CACHE_HOME/disembed``, else ``~/.cache/disembed``."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "disembed"
