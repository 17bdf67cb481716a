"""The one JSON rule of the project: non-finite floats (nan, inf) are written as ``null``.

Strict JSON has no NaN literal; every result file goes through :func:`json_safe`, so
it can be read by any JSON parser, and readers turn ``null`` scores back into ``nan``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .files import atomic_write_text


def json_safe(obj: Any) -> Any:
    """``obj`` with non-finite floats as ``None``, numpy scalars/arrays as Python values,
    tuples as lists, paths as strings and dict keys as strings."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy scalars and arrays
        return json_safe(obj.tolist())
    return obj


def dumps_json(obj: Any, *, indent: int | None = 2) -> str:
    """Strict JSON text of ``json_safe(obj)`` (keys sorted, no NaN literals)."""
    return json.dumps(json_safe(obj), indent=indent, sort_keys=True, allow_nan=False)


def write_json(obj: Any, path: str | Path | None = None) -> str:
    """Strict JSON text of ``obj`` (:func:`dumps_json`); also written atomically to ``path``
    when given. What every result type's ``to_json`` is."""
    text = dumps_json(obj)
    if path is not None:
        atomic_write_text(path, text + "\n")
    return text
