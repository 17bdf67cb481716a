"""Run exported folders with plain sentence-transformers in a new process without disembed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

FRESH = textwrap.dedent("""
    import importlib.abc, json, sys

    class NoDisembed(importlib.abc.MetaPathFinder):  # disembed is not importable here
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "disembed":
                raise ImportError("disembed is blocked in this process")

    sys.meta_path.insert(0, NoDisembed())
    from sentence_transformers import SentenceTransformer
    jobs, result, models = json.load(open(sys.argv[1])), [], {}
    for job in jobs:
        key = (job["dir"], job.get("trust", False))
        if key not in models:
            models[key] = SentenceTransformer(job["dir"], device="cpu",
                                              trust_remote_code=job.get("trust", False))
        call = getattr(models[key], job.get("call", "encode"))
        result.append(call(job["texts"], **job.get("kwargs", {})).tolist())
    assert not any(m.startswith("disembed") for m in sys.modules), "the export imported disembed"
    json.dump(result, open(sys.argv[2], "w"))
""")


def encode_in_fresh_process(jobs: list[dict], tmp_path) -> list[np.ndarray]:
    """One ``(n, d)`` array per job, computed where disembed cannot be imported.

    A job is ``{"dir": folder, "texts": [...], "call": "encode" | "encode_query" |
    "encode_document", "kwargs": {...}, "trust": bool}``.
    """
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    (tmp_path / "fresh.py").write_text(FRESH)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONNOUSERSITE"] = "1"
    subprocess.run([sys.executable, "-I", str(tmp_path / "fresh.py"), str(tmp_path / "jobs.json"),
                    str(tmp_path / "out.json")], check=True, env=env, cwd=tmp_path, timeout=900)
    out = json.loads((tmp_path / "out.json").read_text())
    return [np.asarray(rows, np.float64) for rows in out]


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
