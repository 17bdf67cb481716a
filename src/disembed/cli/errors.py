"""How the command line ends on an error: one exit code per kind, one line per error.

======================================  ====  =============================================
what went wrong                         exit  what the user sees
======================================  ====  =============================================
a bad argument (argparse)               2     usage + ``disembed VERB: error: argument ...``
a bad input, setting or file            2     ``disembed VERB: error: <what, expected, fix>``
  (any :class:`~disembed.exceptions.DisembedError`)
the system refused (disk full, file     2     ``disembed VERB: error: disk full / file too
  too large, permission, missing path)        large: <path> ...`` (an ``OSError``)
  (also when raised from one: an          2     naming the paths the command writes when
  error of a library that wraps it)             the system did not say which one
the reader of a pipe left (``| head``)  0     nothing (as other Unix tools)
Ctrl-C                                  130   ``interrupted; rerun the same command to resume``
a bug in disembed                       1     ``internal error ...; rerun with -v``; the
                                              traceback only with ``-v``
======================================  ====  =============================================
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import traceback
from typing import Sequence

from ..exceptions import DisembedError

USER_ERROR = 2
INTERNAL_ERROR = 1
INTERRUPTED = 130

_DISK_FULL = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def ignore_file_size_signal() -> None:
    """Turn a hit file-size limit (``ulimit -f``) into an ``OSError`` (EFBIG) the command
    reports, instead of the default SIGXFSZ that kills the process without a word."""
    if hasattr(signal, "SIGXFSZ"):
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        except ValueError:  # not the main thread (e.g. inside a test runner's worker)
            pass


def describe_os_error(exc: OSError, paths: Sequence[str] = ()) -> str:
    """One line for an ``OSError``: what failed, on which path (where the system did not
    say, the ``paths`` the command writes), and what to do."""
    where = (exc.filename if exc.filename is not None
             else f"one of {', '.join(map(str, paths))}" if paths
             else "(unknown path)")
    reason = exc.strerror or str(exc)
    if exc.errno in _DISK_FULL:
        return (f"disk full / file too large: {where} ({reason}). Free space or raise the "
                "file-size limit, then rerun the same command: finished outputs and the "
                "embedding cache are kept and an unfinished output was not written")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"permission denied: {where} ({reason}); choose a path you can write"
    if exc.errno == errno.ENOENT:
        return f"no such file or directory: {where}"
    if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST):
        return f"{where}: {reason}; expected a file where a file is needed and a folder " \
               "where a folder is needed"
    return f"{reason}: {where}" if exc.filename is not None else f"system error: {exc}"


def _os_error_in(exc: BaseException | None) -> OSError | None:
    """The ``OSError`` ``exc`` is, or was raised from or while handling (a library that
    wraps a full disk in its own error type)."""
    for _ in range(8):
        if exc is None or isinstance(exc, OSError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush into the
    closed pipe does not print another error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file behind sys.stdout (tests)
        pass


def report(verb: str, exc: BaseException, verbose: int, paths: Sequence[str] = ()) -> int:
    """Print the one-line message for ``exc`` and return the exit code (see the table);
    ``paths``: what the command writes, named where the system names no path."""
    if isinstance(exc, KeyboardInterrupt):
        _say(f"disembed {verb}: interrupted; rerun the same command to resume")
        return INTERRUPTED
    if isinstance(exc, DisembedError):
        _say(f"disembed {verb}: error: {exc}")
        return USER_ERROR
    os_error = _os_error_in(exc)
    if os_error is not None and os_error.errno == errno.EPIPE:
        _quiet_stdout()  # `disembed ... --out - | head`: the reader has what it wanted
        return 0
    if verbose:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if os_error is not None:
        _say(f"disembed {verb}: error: {describe_os_error(os_error, paths)}")
        return USER_ERROR
    if isinstance(exc, MemoryError):
        _say(f"disembed {verb}: error: out of memory; use a smaller --batch-size or --chunk, "
             "or a machine with more memory")
        return USER_ERROR
    first = (str(exc).splitlines() or [""])[0][:200]
    _say(f"disembed {verb}: internal error: {type(exc).__name__}: {first}. This is a bug in "
         "disembed" + ("" if verbose else "; rerun with -v for the traceback") +
         " and report it")
    return INTERNAL_ERROR


def _say(line: str) -> None:
    print(line, file=sys.stderr)  # noqa: T201


__all__ = ["INTERNAL_ERROR", "INTERRUPTED", "USER_ERROR", "describe_os_error",
           "ignore_file_size_signal", "report"]
