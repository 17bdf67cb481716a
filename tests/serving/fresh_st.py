"""Run exported folders with plain sentence-transformers in a process without disembed.

The process is started once per test process (pytest-xdist worker) and then serves every
call: importing torch and sentence-transformers took 5-30 s, and paid once per call it was
a fifth of the default suite. It is still a process where disembed cannot be imported (a
finder blocks it, and every call checks that nothing of disembed was loaded), started with
``-I`` and without ``PYTHONPATH`` (so not from this checkout's ``src``), with the
environment the test run started with. It loads each call's models anew (a test may change a
folder between calls); after a failed call it is stopped and the next call starts another.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

SERVER = textwrap.dedent("""
    import importlib.abc, json, sys, traceback

    class NoDisembed(importlib.abc.MetaPathFinder):  # disembed is not importable here
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "disembed":
                raise ImportError("disembed is blocked in this process")

    sys.meta_path.insert(0, NoDisembed())
    from sentence_transformers import SentenceTransformer

    def run(jobs_path, out_path):
        jobs, result, models = json.load(open(jobs_path)), [], {}
        for job in jobs:
            key = (job["dir"], job.get("trust", False))
            if key not in models:
                models[key] = SentenceTransformer(job["dir"], device="cpu",
                                                  trust_remote_code=job.get("trust", False))
            call = getattr(models[key], job.get("call", "encode"))
            result.append(call(job["texts"], **job.get("kwargs", {})).tolist())
        assert not any(m.startswith("disembed") for m in sys.modules), \\
            "the export imported disembed"
        json.dump(result, open(out_path, "w"))

    out = sys.stdout
    sys.stdout = sys.stderr  # what a library prints cannot be taken for an answer
    out.write("@ready\\n"); out.flush()
    for line in sys.stdin:
        jobs_path, out_path = json.loads(line)
        try:
            run(jobs_path, out_path)
            out.write("@ok\\n")
        except BaseException:
            sys.stderr.write(traceback.format_exc())
            out.write("@failed\\n")
        out.flush()
""")
#: the environment of the test run as it started (before any test changed a variable)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONNOUSERSITE": "1"}
TIMEOUT = 900.0  # seconds for one call, as the one-process-per-call version allowed


class _Server:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="disembed-fresh-st-"))
        (self.folder / "server.py").write_text(SERVER)
        self.log = open(self.folder / "stderr.txt", "w+b")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(self.folder / "server.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=_ENV, cwd=self.folder, text=True)
        self.answer()  # "@ready": the imports are done

    def answer(self) -> str:
        """The next ``@...`` line the server writes, within :data:`TIMEOUT`."""
        deadline = time.monotonic() + TIMEOUT
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.stop()
                    raise TimeoutError(f"the sentence-transformers process ran past {TIMEOUT} s")
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError("the sentence-transformers process ended:\n" + self.errors())
                if line.startswith("@"):
                    return line.strip()

    def errors(self) -> str:
        """The end of what the process wrote to stderr (its traceback, when a call failed)."""
        return (self.folder / "stderr.txt").read_bytes().decode("utf-8", "replace")[-4000:]

    def call(self, jobs_path: Path, out_path: Path) -> None:
        self.proc.stdin.write(json.dumps([str(jobs_path), str(out_path)]) + "\n")
        self.proc.stdin.flush()
        if self.answer() != "@ok":
            raise RuntimeError("sentence-transformers failed on the export:\n" + self.errors())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


_server: _Server | None = None


def _stop() -> None:
    if _server is not None:
        _server.stop()


atexit.register(_stop)


def encode_in_fresh_process(jobs: list[dict], tmp_path) -> list[np.ndarray]:
    """One ``(n, d)`` array per job, computed where disembed cannot be imported.

    A job is ``{"dir": folder, "texts": [...], "call": "encode" | "encode_query" |
    "encode_document", "kwargs": {...}, "trust": bool}``.
    """
    global _server
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    if _server is None or _server.proc.poll() is not None:
        _server = _Server()
    try:
        _server.call(tmp_path / "jobs.json", tmp_path / "out.json")
    except BaseException:
        _server.stop()  # the next call gets a process in a known state
        _server = None
        raise
    out = json.loads((tmp_path / "out.json").read_text())
    return [np.asarray(rows, np.float64) for rows in out]


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
