"""The core install (no extras) runs the CLI: optional libraries are imported only by the
verbs and paths that need them. Guards the README's first command, which installs
``.[plot]`` only (a module-level ``import pydantic`` in serving once broke every verb)."""

from __future__ import annotations

import json
import subprocess
import sys

OPTIONAL = ("fastapi", "pydantic", "uvicorn", "starlette", "httpx", "sentence_transformers",
            "transformers", "huggingface_hub", "faiss", "ray", "onnx", "onnxruntime",
            "openai", "hypothesis")

BLOCK = f"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ImportError("blocked optional dependency: " + name)
sys.meta_path.insert(0, Block())
from disembed.cli import main
"""
BLOCKER = BLOCK + "sys.exit(main(sys.argv[1:]))\n"
#: every verb's --help in one process (one start of Python and torch, not nine): each
#: call's exit code, or the error it raised, written to stderr as the last line
EVERY_HELP = BLOCK + """
codes = {}
for argv in json.loads(sys.argv[1]):
    try:
        codes[" ".join(argv)] = main(argv)
    except SystemExit as exc:
        codes[" ".join(argv)] = exc.code
    except BaseException as exc:  # an import the core install lacks
        codes[" ".join(argv)] = repr(exc)
sys.stderr.write(json.dumps(codes) + "\\n")
"""
VERBS = ("bench", "train", "evaluate", "serve", "export", "mine", "calibrate", "data")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER, *args], capture_output=True,
                          text=True, timeout=300)


def test_every_verb_parses_without_the_optional_extras():
    calls = [["--help"]] + [[verb, "--help"] for verb in VERBS]
    done = subprocess.run([sys.executable, "-c", EVERY_HELP, json.dumps(calls)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    codes = json.loads(done.stderr.splitlines()[-1])
    assert codes == {" ".join(argv): 0 for argv in calls}, done.stderr[-2000:]


def test_serve_without_the_serve_extra_names_the_install(tmp_path):
    done = _cli("serve", "--encoder", "hash:8", "--port", "0")
    assert done.returncode == 2
    assert "pip install" in done.stderr and "serve" in done.stderr
