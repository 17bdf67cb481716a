"""The worked examples of CONTRIBUTING.md, executed from the document itself (so the
document cannot drift from what the contract tests run)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

CONTRIBUTING = Path(__file__).resolve().parents[1] / "CONTRIBUTING.md"


def example(kind: str) -> dict:
    """The names defined by the ```python block after ``<!-- example: kind -->``."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {kind} -->\s*```python\n(.*?)```", text, re.S)
    if match is None:
        raise LookupError(f"CONTRIBUTING.md has no '<!-- example: {kind} -->' python block")
    module = types.ModuleType(f"contributing_{kind}")  # a real module, as a plugin file is
    sys.modules[module.__name__] = module
    code = compile(match.group(1), f"CONTRIBUTING.md ({kind} example)", "exec",
                   dont_inherit=True)
    exec(code, module.__dict__)
    return module.__dict__
