"""The worked examples of CONTRIBUTING.md, executed from the document itself (so the
document cannot drift from what the contract tests run)."""

from __future__ import annotations

import re
from pathlib import Path

CONTRIBUTING = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"


def example(kind: str) -> dict:
    """The names defined by the ```python block after ``<!-- example: kind -->``."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {kind} -->\s*```python\n(.*?)```", text, re.S)
    if match is None:
        raise LookupError(f"CONTRIBUTING.md has no '<!-- example: {kind} -->' python block")
    namespace: dict = {"__name__": f"contributing_{kind}"}
    exec(compile(match.group(1), f"CONTRIBUTING.md ({kind} example)", "exec"), namespace)
    return namespace


Shift = example("recipe")["Shift"]
ConstantEncoder = example("encoder")["ConstantEncoder"]
