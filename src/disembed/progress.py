"""Progress reporting that follows the log level and can be switched off.

The library never prints: progress bars go to stderr through tqdm only when the
``disembed`` logger is at INFO or lower and ``DISEMBED_PROGRESS`` is not ``0``.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from tqdm.auto import tqdm

logger = logging.getLogger("disembed")


def progress_enabled() -> bool:
    if os.environ.get("DISEMBED_PROGRESS", "1") == "0":
        return False
    return logger.getEffectiveLevel() <= logging.INFO


def progress_bar(total: int | None, desc: str, unit: str = "it", **kwargs: Any):
    """A tqdm bar (rate and ETA shown) or a silent stand-in with the same interface;
    ``total=None`` gives an open-ended bar (a count and a rate, no ETA)."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=not progress_enabled(),
        dynamic_ncols=True,
        leave=False,
        **kwargs,
    )
