"""A saved model's learned config and weights, checked on load as its constructor and
``fit`` would have made them.

The checksums in ``config.json`` catch an accidental edit; they do not catch a deliberate
one with the checksums recomputed, nor a model written by another tool. Such a config
once loaded silently: a negative or NaN temperature, a NaN threshold, a duplicated or
reordered language list (each route then serves another language), integer or boolean
weights (every score 0), and weights of 3e38 (finite, but ``meaning`` overflowed to inf and
blamed the input). :func:`check_saved` refuses each with a
:class:`~disembed.exceptions.CheckpointError` naming the file and the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..data.languages import normalize_language
from ..exceptions import CheckpointError, ConfigError

#: the largest magnitude a saved weight may hold: learned from unit-scale embeddings,
#: weights are far below it, and products of a few such values stay finite in float32
MAX_WEIGHT = 1e15

#: learned numbers of the language identifier and the values each accepts
_LID_NUMBERS: dict[str, tuple[float, float, bool]] = {  # name -> (low, high, low inclusive)
    "l2": (0.0, math.inf, True),
    "temperature": (0.0, math.inf, False),
    "route_temperature": (0.0, math.inf, False),
    "outlier_quantile": (0.0, 1.0, True),
    "threshold": (-1.0, 1.0, True),  # a cosine
}


def check_saved(cfg_path: Path, config: dict[str, Any], state: dict[str, np.ndarray]) -> None:
    """Raise CheckpointError unless ``config`` (``config.json``) and ``state`` (the
    weights) are what a saved model can hold; see the module docstring."""
    _check_weights(cfg_path, state)
    for where, value in _walk(config.get("params", {}), "params"):
        _check_number(cfg_path, where, value, finite=False)
    learned = config.get("learned", {})
    if not isinstance(learned, dict):
        raise CheckpointError(f"{cfg_path}: 'learned' must be a mapping; got "
                              f"{type(learned).__name__}; restore the file or train again")
    for where, value in _walk(learned, "learned"):
        _check_number(cfg_path, where, value, finite=True)
    calibrated = set((config.get("metadata") or {}).get("calibrated") or {})
    for where, value in _languages(learned, "learned"):
        _check_languages(cfg_path, where, value, calibrated)
    lid = learned.get("language_id")
    if isinstance(lid, dict):
        for name, (low, high, closed) in _LID_NUMBERS.items():
            if name in lid:
                _check_range(cfg_path, f"learned.language_id.{name}", lid[name], low, high,
                             closed)


def _check_weights(cfg_path: Path, state: dict[str, np.ndarray]) -> None:
    for name, value in sorted(state.items()):
        if value.dtype.kind != "f":
            raise CheckpointError(
                f"{cfg_path.parent / 'model.safetensors'}: weight {name!r} is {value.dtype}, "
                "expected floating point (a model's weights are never integers or booleans: "
                "every score would be 0); the file was written by something other than "
                "disembed: save the model again")
        top = float(np.max(np.abs(value))) if value.size else 0.0
        if top > MAX_WEIGHT:
            raise CheckpointError(
                f"{cfg_path.parent / 'model.safetensors'}: weight {name!r} holds a value of "
                f"magnitude {top:.3g}, above {MAX_WEIGHT:g} (learned weights are far smaller; "
                "such a value overflows to inf in meaning()): the file is corrupt or was "
                "edited; restore it or train the model again")


def _walk(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every scalar under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{where}[{i}]")
    else:
        yield where, node


def _languages(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every ``languages`` entry under ``node``, with its dotted path."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "languages":
                yield f"{where}.{key}", value
            else:
                yield from _languages(value, f"{where}.{key}")


def _check_number(cfg_path: Path, where: str, value: Any, *, finite: bool) -> None:
    """NaN is never a setting; a learned number is also never infinite."""
    if isinstance(value, float) and (math.isnan(value) or (finite and math.isinf(value))):
        raise CheckpointError(f"{cfg_path}: {where} is {value}, expected a finite number; the "
                              "file was edited or written by another tool: restore it or "
                              "train the model again")


def _check_range(cfg_path: Path, where: str, value: Any, low: float, high: float,
                 closed: bool) -> None:
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and (value >= low if closed else value > low)
          and value <= high)
    if not ok:
        bound = f"{'>=' if closed else '>'} {low:g}" + (f" and <= {high:g}"
                                                       if math.isfinite(high) else "")
        raise CheckpointError(f"{cfg_path}: {where} is {value!r}, expected a number {bound} "
                              "(as the constructor and fit make it); the file was edited: "
                              "restore it or train the model again")


def _check_languages(cfg_path: Path, where: str, value: Any, calibrated: set[str]) -> None:
    """A list of distinct canonical codes; those fitted (not added by calibration) in the
    sorted order ``fit`` gives them, so each route keeps its language."""
    fix = "the file was edited: restore it or train the model again"
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise CheckpointError(f"{cfg_path}: {where} must be a list of language codes; got "
                              f"{value!r:.80}; {fix}")
    for code in value:
        try:
            canonical = normalize_language(code)
        except ConfigError:
            canonical = None
        if canonical != code:
            raise CheckpointError(f"{cfg_path}: {where} holds {code!r}, not a canonical "
                                  f"language code (expected e.g. 'de'); {fix}")
    repeated = sorted({c for c in value if value.count(c) > 1})
    if repeated:
        raise CheckpointError(f"{cfg_path}: {where} lists {repeated} more than once (each "
                              f"language has one route); {fix}")
    fitted = [c for c in value if c not in calibrated]
    if fitted != sorted(fitted):
        raise CheckpointError(f"{cfg_path}: {where} is {value}, but fit saves its languages "
                              f"sorted ({sorted(fitted)}, calibrated ones appended): reordered, "
                              f"each route would serve another language; {fix}")


__all__ = ["MAX_WEIGHT", "check_saved"]
