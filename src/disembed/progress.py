"""Progress reporting that follows the log level and can be switched off.

The library never prints: progress bars go to stderr through tqdm only when the
``disembed`` logger is at INFO or lower and ``DISEMBED_PROGRESS`` is not ``0``. A finished
bar stays as one summary line (count, time, rate).

Work deeper than the bar's owner reports through :func:`advance`: a bar opened with
:func:`reporting_to` receives it, so an encoder moves the bar after every batch it runs
without the encoder protocol knowing about bars (``encode(texts, *, batch_size)`` stays as
it is). Outside such a block :func:`advance` does nothing; the bar lives in a context
variable, so threads (the service's workers) never see another thread's bar.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from tqdm.auto import tqdm

logger = logging.getLogger("disembed")

_receiver: ContextVar[Callable[[float], Any] | None] = ContextVar("disembed_progress",
                                                                  default=None)
_silenced: ContextVar[bool] = ContextVar("disembed_no_progress", default=False)


def progress_enabled() -> bool:
    if _silenced.get() or os.environ.get("DISEMBED_PROGRESS", "1") == "0":
        return False
    return logger.getEffectiveLevel() <= logging.INFO


@contextmanager
def no_progress() -> Iterator[None]:
    """No bars inside the block, in this thread or task only (a service answering requests
    draws none, whatever the log level; other threads keep theirs)."""
    token = _silenced.set(True)
    try:
        yield
    finally:
        _silenced.reset(token)


def progress_bar(total: int | None, desc: str, unit: str = "it", *, leave: bool = True,
                 **kwargs: Any):
    """A tqdm bar (rate and ETA shown) or a silent stand-in with the same interface;
    ``total=None`` gives an open-ended bar (a count and a rate, no ETA). A finished bar
    stays as its summary line unless ``leave=False`` (bars nested in another's loop)."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=not progress_enabled(),
        dynamic_ncols=True,
        leave=leave,
        **kwargs,
    )


@contextmanager
def reporting_to(bar) -> Iterator[None]:
    """Within the block, :func:`advance` moves ``bar``."""
    token = _receiver.set(bar.update)
    try:
        yield
    finally:
        _receiver.reset(token)


def advance(n: float) -> None:
    """``n`` more units of the current work are done (an encoder calls this per batch)."""
    receiver = _receiver.get()
    if receiver is not None:
        receiver(n)
