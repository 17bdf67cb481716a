"""One writer per run folder: an advisory file lock (``filelock``) held for a whole run.

Two ``mine`` runs sharing a run folder once interleaved their writes into the same
memory-mapped matrices and wrote wrong pairs with exit 0. :func:`folder_lock` takes
``FOLDER/.disembed.lock`` for the duration of a run; a second process finds it taken, logs
that it waits for the other one, and goes on when the first is done (it then reuses what
the first wrote, as a resumed run would). ``DISEMBED_LOCK_TIMEOUT`` (seconds, default: wait
as long as it takes) makes it give up with a clear error instead. The lock is released by
the operating system when its holder dies, so a killed run never leaves a folder locked.
"""

from __future__ import annotations

import logging
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..exceptions import ConfigError

logger = logging.getLogger(__name__)

LOCK_NAME = ".disembed.lock"
TIMEOUT_ENV_VAR = "DISEMBED_LOCK_TIMEOUT"


def lock_timeout() -> float | None:
    """``$DISEMBED_LOCK_TIMEOUT`` as seconds >= 0, or ``None`` (wait as long as it takes)."""
    text = os.environ.get(TIMEOUT_ENV_VAR, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{TIMEOUT_ENV_VAR}={text!r}: expected a number of seconds >= 0 "
                          f"(how long to wait for another run's folder), e.g. 600; unset it "
                          "to wait as long as it takes")
    return value


@contextmanager
def folder_lock(folder: str | os.PathLike, what: str = "run folder") -> Iterator[Path]:
    """Hold the lock of ``folder`` (created if missing) while the block runs."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    timeout = lock_timeout()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(folder)
        raise
    lock = FileLock(str(folder / LOCK_NAME))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.warning("the %s %s is in use by another disembed process; waiting for it to "
                       "finish (%s)", what, folder,
                       f"at most {timeout:g} s, {TIMEOUT_ENV_VAR}" if timeout is not None
                       else f"Ctrl-C to stop; set {TIMEOUT_ENV_VAR} to give up after a time")
        try:
            lock.acquire(timeout=-1 if timeout is None else timeout)
        except Timeout:
            raise ConfigError(
                f"the {what} {folder} was still in use by another disembed process after "
                f"{timeout:g} s ({TIMEOUT_ENV_VAR}); wait for it to finish, or give this run "
                "another folder (e.g. --run-dir / --out)") from None
    try:
        yield folder
    finally:
        lock.release()


__all__ = ["LOCK_NAME", "TIMEOUT_ENV_VAR", "folder_lock", "lock_timeout"]
