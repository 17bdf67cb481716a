"""The core install (no extras) runs the CLI: optional libraries are imported only by the
verbs and paths that need them. Guards the README's first command, which installs
``.[plot]`` only (a module-level ``import pydantic`` in serving once broke every verb)."""

from __future__ import annotations

import subprocess
import sys

OPTIONAL = ("fastapi", "pydantic", "uvicorn", "starlette", "httpx", "sentence_transformers",
            "transformers", "huggingface_hub", "faiss", "ray", "onnx", "onnxruntime",
            "openai", "hypothesis")

BLOCKER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ImportError("blocked optional dependency: " + name)
sys.meta_path.insert(0, Block())
from disembed.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER, *args], capture_output=True,
                          text=True, timeout=300)


def test_every_verb_parses_without_the_optional_extras():
    done = _cli("--help")
    assert done.returncode == 0, done.stderr
    for verb in ("bench", "train", "evaluate", "serve", "export", "mine", "calibrate", "data"):
        done = _cli(verb, "--help")
        assert done.returncode == 0, (verb, done.stderr[-2000:])


def test_serve_without_the_serve_extra_names_the_install(tmp_path):
    done = _cli("serve", "--encoder", "hash:8", "--port", "0")
    assert done.returncode == 2
    assert "pip install" in done.stderr and "serve" in done.stderr
