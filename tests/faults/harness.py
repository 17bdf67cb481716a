"""Run ``disembed`` in a forked child and hurt it: ``kill -9`` at a chosen point, a file-size
limit (a full disk, as ``ulimit -f`` makes it), or after a delay.

Kill points are *events* in the child, counted deterministically: each call of
``os.fsync`` and each ``os.replace`` (before it, and after it), i.e. every step of every
atomic write and every memory-map flush of the mining matrices (``mmap.flush`` fsyncs
through ``msync``, which is counted as its ``np.memmap.flush``). A first, undisturbed run
counts the events; a seeded choice of them is then killed at. The child is forked from
the test process (disembed is already imported, so a run costs milliseconds, not the
seconds of a fresh interpreter) and leaves with ``os._exit``.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from disembed.hardware.threads import configure_threads

TMP_MARK = ".tmp-"


@dataclass
class Outcome:
    """How a child ended: ``code`` (exit status, or ``-signal``), its output, its events."""

    code: int
    stdout: str
    stderr: str
    events: int

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL


def _install_kill_switch(kill_at: int | None, counter_path: Path) -> None:
    """Count events; SIGKILL this process when the ``kill_at``-th one (1-based) comes."""
    count = [0]

    def event() -> None:
        count[0] += 1
        counter_path.write_text(str(count[0]))
        if kill_at is not None and count[0] >= kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    real_fsync, real_replace, real_flush = os.fsync, os.replace, np.memmap.flush

    def fsync(fd):
        event()
        return real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        event()
        real_replace(src, dst, *args, **kwargs)
        event()

    def flush(self):
        event()
        return real_flush(self)

    os.fsync, os.replace, np.memmap.flush = fsync, replace, flush


def run_disembed(argv: Sequence[str], workdir: Path, *, env: dict[str, str] | None = None,
                 kill_at: int | None = None, kill_after: float | None = None,
                 fsize_limit: int | None = None, timeout: float = 300) -> Outcome:
    """``disembed argv`` in a forked child (see the module docstring)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out, err, counter = workdir / "stdout", workdir / "stderr", workdir / "events"
    counter.write_text("0")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(list(argv), out, err, counter, env or {}, kill_at, fsize_limit)
    if kill_after is not None:
        time.sleep(kill_after)
        _kill(pid)
    return finish(Started(pid, list(argv), workdir), timeout)


@dataclass
class Started:
    """A child started by :func:`start_disembed`, not waited for yet."""

    pid: int
    argv: list[str]
    workdir: Path

    def running(self) -> bool:
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


def start_disembed(argv: Sequence[str], workdir: Path, *, env: dict[str, str] | None = None
                   ) -> Started:
    """``disembed argv`` in a forked child that runs beside the test (several at once)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "events").write_text("0")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(list(argv), workdir / "stdout", workdir / "stderr", workdir / "events",
               env or {}, None, None)
    return Started(pid, list(argv), workdir)


def finish(child: Started, timeout: float = 300) -> Outcome:
    """Wait for ``child`` (killed after ``timeout`` seconds) and say how it ended."""
    pid, argv, workdir = child.pid, child.argv, child.workdir
    out, err, counter = workdir / "stdout", workdir / "stderr", workdir / "events"
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            _kill(pid)
            os.waitpid(pid, 0)
            raise TimeoutError(f"disembed {' '.join(argv)} did not finish in {timeout}s")
        time.sleep(0.005)
    code = os.waitstatus_to_exitcode(status)
    return Outcome(code, out.read_text(errors="replace"), err.read_text(errors="replace"),
                   int(counter.read_text() or 0))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child(argv, out, err, counter, env, kill_at, fsize_limit) -> None:  # pragma: no cover
    code = 70
    try:
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # not the test runner's capture
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        # One thread in the child: the parent's OpenMP pool does not survive fork(), so the
        # child's first parallel region with more threads waits forever for workers that
        # exist only in the parent (a slow-suite run hung here after the e5 tests had
        # started torch's two-thread pool). Set before anything in the child multiplies.
        configure_threads(1)
        os.environ.update(env)
        os.environ["DISEMBED_PROGRESS"] = "0"
        if fsize_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))
        _install_kill_switch(kill_at, counter)
        from disembed.cli import main

        try:
            code = main(list(argv) + ["-q"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - report anything, then leave
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def kill_points(total: int, count: int, seed: int) -> list[int]:
    """``count`` distinct event numbers in ``1..total`` (seeded), always with the first and
    the last."""
    if total <= count:
        return list(range(1, total + 1))
    rng = random.Random(seed)
    middle = rng.sample(range(2, total), count - 2)
    return sorted({1, total, *middle})


def temp_files(*roots: Path) -> list[Path]:
    """Temporary files and commit journals of atomic writes left anywhere under ``roots``."""
    return [p for root in roots if root.exists() for mark in (TMP_MARK, ".commit-")
            for p in root.rglob(f"*{mark}*")]


def snapshot(paths: Sequence[Path]) -> tuple[bytes | None, ...]:
    """The bytes of each path (``None``: missing)."""
    return tuple(p.read_bytes() if p.is_file() else None for p in paths)
