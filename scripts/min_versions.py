"""Print pip constraints that pin every torch-independent dependency of disembed to the
lower bound pyproject.toml declares, for the minimal-versions CI job (issue 32):

    python scripts/min_versions.py > min.txt
    pip install torch==2.13.0 -c min.txt -e . pytest hypothesis ...

Every dependency must be declared as ``name>=version``: a floor is a promise, and this job
is what tests it. torch is left out (CI pins the torch it tests with).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
FLOOR = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*)\s*>=\s*([0-9][0-9A-Za-z.]*)")


def floors(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """``name==floor`` for each of ``[project].dependencies`` but torch."""
    out = []
    for dep in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]:
        match = FLOOR.fullmatch(dep.strip())
        if match is None:
            raise SystemExit(f"{pyproject}: dependency {dep!r} is not of the form name>=version; "
                             "the minimal-versions job needs a floor for each")
        name, version = match.groups()
        if name.lower() != "torch":
            out.append(f"{name}=={version}")
    return out


if __name__ == "__main__":
    sys.stdout.write("".join(line + "\n" for line in floors()))
