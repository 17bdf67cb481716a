"""Progress bars on long work, on by default where someone watches, and easy to switch off.

The library never prints: its bars go to stderr through tqdm. Whether they show does not
depend on the log level. In order, the first that is set decides:

1. :func:`no_progress` (a block, in this thread or task only: the service's workers);
2. :func:`set_progress` (``True``/``False`` for the whole process; ``None`` undoes it);
3. the environment variable ``DISEMBED_PROGRESS``: ``1`` on, ``0`` off, ``auto``;
4. ``auto`` (the default): on when stderr is a terminal or the code runs in a Jupyter
   kernel, off otherwise (a log file, a pipe, a CI job).

The command line's ``--no-progress`` and ``-q`` set ``DISEMBED_PROGRESS=0`` while a verb
runs. A finished bar stays as one summary line (count, time, rate).

Work deeper than the bar's owner reports through :func:`advance`: a bar opened with
:func:`reporting_to` receives it, so an encoder moves the bar after every batch it runs
without the encoder protocol knowing about bars (``encode(texts, *, batch_size)`` stays as
it is). Outside such a block :func:`advance` does nothing; the bar lives in a context
variable, so threads (the service's workers) never see another thread's bar.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from tqdm.auto import tqdm

from .exceptions import ConfigError

logger = logging.getLogger("disembed")

_receiver: ContextVar[Callable[[float], Any] | None] = ContextVar("disembed_progress",
                                                                  default=None)
_silenced: ContextVar[bool] = ContextVar("disembed_no_progress", default=False)


PROGRESS_ENV_VAR = "DISEMBED_PROGRESS"
_ENV_VALUES = {"1": True, "0": False, "auto": None, "": None}
_process_setting: bool | None = None


def set_progress(enabled: bool | None) -> None:
    """Show (``True``) or hide (``False``) disembed's bars in this process, whatever the
    environment; ``None`` goes back to ``DISEMBED_PROGRESS`` and the terminal rule."""
    global _process_setting
    if enabled is not None and not isinstance(enabled, bool):
        raise ConfigError(f"set_progress takes True, False or None; got {enabled!r}")
    _process_setting = enabled


def _watched() -> bool:
    """``auto``: someone sees stderr (a terminal, or a Jupyter kernel's output area)."""
    stream = sys.stderr
    try:
        if stream is not None and stream.isatty():
            return True
    except (AttributeError, ValueError):  # a replaced or closed stream
        pass
    return "ipykernel" in sys.modules


def progress_enabled() -> bool:
    """Whether a bar opened now shows (the order of the module docstring)."""
    if _silenced.get():
        return False
    if _process_setting is not None:
        return _process_setting
    value = os.environ.get(PROGRESS_ENV_VAR, "auto").strip().lower()
    if value not in _ENV_VALUES:
        logger.warning("%s=%r is not one of 1, 0, auto; using auto", PROGRESS_ENV_VAR, value)
        value = "auto"
    chosen = _ENV_VALUES[value]
    return _watched() if chosen is None else chosen


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
