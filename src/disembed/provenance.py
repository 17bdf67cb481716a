"""Where a result came from: package version, git commit, machine, time."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch

from .version import __version__


def git_commit(path: str | os.PathLike | None = None) -> str | None:
    """The commit of the checkout holding this package (``+dirty`` if modified), or None."""
    where = Path(path) if path else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                                text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=where, capture_output=True, text=True, timeout=5).stdout
        return commit + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


_COMMAND: list[str] | None = None


def record_command(argv: list[str]) -> None:
    """Remember the command being run (the CLI records ``disembed VERB ...`` here)."""
    global _COMMAND
    _COMMAND = list(argv)


def command_line() -> str:
    """The recorded command, else the one that started this process, shell-quoted."""
    if _COMMAND is not None:
        return shlex.join(_COMMAND)
    argv = list(sys.argv) or ["python"]
    if os.path.basename(argv[0]) in ("disembed", "__main__.py"):
        argv[0] = "disembed"
    return shlex.join(argv)


@functools.lru_cache(maxsize=1)
def _checkout_commit() -> str | None:
    """This package's commit, asked of git once per process (two subprocesses): a bench of
    many runs records it in every result."""
    return git_commit()


def environment() -> dict:
    """Package version, git commit, the command line, Python/torch versions, CPU count and a
    UTC timestamp."""
    torch_version, threads = torch.__version__, torch.get_num_threads()
    return {
        "disembed_version": __version__,
        "git_commit": _checkout_commit(),
        "command": command_line(),
        "python": platform.python_version(),
        "torch": torch_version,
        "torch_threads": threads,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
