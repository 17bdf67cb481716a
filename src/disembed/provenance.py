"""Where a result came from: package version, git commit, machine, time."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
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


def environment() -> dict:
    """Package version, git commit, Python/torch versions, CPU count and a UTC timestamp."""
    torch_version, threads = torch.__version__, torch.get_num_threads()
    return {
        "disembed_version": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch_version,
        "torch_threads": threads,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
