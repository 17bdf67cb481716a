"""Declared constraints on hyperparameters and settings, checked in one place.

A recipe (or a config) declares what each of its settings accepts as a class attribute, in
the manner of scikit-learn's ``_parameter_constraints``::

    _parameter_constraints = {
        "lr": [Interval(float, 0, None, closed="neither")],
        "rank": [Interval(int, 1, None), None],          # None: the value None is allowed
        "solver": [Options("lstsq", "sgd")],
    }

:func:`validate_params` checks a mapping of settings against such a declaration: unknown
names get a "did you mean", a value must satisfy at least one of its constraints, and the
error says what was given, what is accepted and how to fix it. Settings without a
declaration are accepted as they are (their owner checks them).

This module only depends on the standard library, so every layer can use it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Iterable, Mapping

from ..exceptions import ConfigError

_CLOSED = ("both", "left", "right", "neither")


@dataclass(frozen=True)
class Interval:
    """A number of ``kind`` (``int`` or ``float``; a bool is neither) between ``low`` and
    ``high`` (``None``: unbounded), ends included as ``closed`` says. ``float`` accepts
    integers too; NaN and infinities are refused."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def __post_init__(self) -> None:
        if self.kind not in (int, float):
            raise TypeError(f"Interval kind must be int or float, got {self.kind!r}")
        if self.closed not in _CLOSED:
            raise TypeError(f"Interval closed must be one of {_CLOSED}, got {self.closed!r}")

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int and not isinstance(value, Integral):
            return False
        if not isinstance(value, Real) or not math.isfinite(value):
            return False
        lo_in = self.closed in ("both", "left")
        hi_in = self.closed in ("both", "right")
        if self.low is not None and (value < self.low or (value == self.low and not lo_in)):
            return False
        return not (self.high is not None
                    and (value > self.high or (value == self.high and not hi_in)))

    def describe(self) -> str:
        noun = "an integer" if self.kind is int else "a finite number"
        lo = "[" if self.closed in ("both", "left") and self.low is not None else "("
        hi = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        if self.low is None and self.high is None:
            return noun
        low = "-inf" if self.low is None else _num(self.low)
        high = "inf" if self.high is None else _num(self.high)
        return f"{noun} in {lo}{low}, {high}{hi}"


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values (strings, usually)."""

    values: tuple

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", tuple(values))

    def accepts(self, value: Any) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False`` (not 0/1, not a string)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"


Constraint = Interval | Options | Boolean | None

#: a random seed: what numpy and torch both accept
SEED = Interval(int, 0, 2**64 - 1)


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _accepts(constraint: Constraint, value: Any) -> bool:
    if constraint is None:
        return value is None
    return constraint.accepts(value)


def describe(constraints: Iterable[Constraint]) -> str:
    """``"an integer in [1, inf) or None"``."""
    parts = ["None" if c is None else c.describe() for c in constraints]
    return " or ".join(parts)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``known``, or ``""``."""
    close = difflib.get_close_matches(name, list(known), n=2, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def check_value(owner: str, name: str, value: Any, constraints: Iterable[Constraint]) -> None:
    """Raise :class:`ConfigError` unless ``value`` meets one of ``constraints``."""
    constraints = list(constraints)
    if any(_accepts(c, value) for c in constraints):
        return
    raise ConfigError(f"{owner}: {name} must be {describe(constraints)}; got {value!r} "
                      f"({type(value).__name__}). Fix the value of {name!r}")


def validate_params(owner: str, params: Mapping[str, Any], accepted: Iterable[str],
                    constraints: Mapping[str, Iterable[Constraint]]) -> None:
    """Check every setting in ``params``: its name must be in ``accepted`` (else "did you
    mean"), its value meet its declared ``constraints`` (undeclared names: any value)."""
    accepted = list(accepted)
    for name, value in params.items():
        if name not in accepted:
            raise ConfigError(f"{owner} takes no {name!r}.{did_you_mean(name, accepted)} Its "
                              f"settings are: {', '.join(accepted) or 'none'}")
        if name in constraints:
            check_value(owner, name, value, constraints[name])


def check_grid(owner: str, grid: Any, accepted: Iterable[str],
               constraints: Mapping[str, Iterable[Constraint]]) -> None:
    """A tuning grid ``{setting: [value, ...]}``: every list non-empty, every value checked
    as :func:`validate_params` checks one."""
    if not isinstance(grid, Mapping):
        raise ConfigError(f"{owner} must map settings to lists of values, e.g. "
                          f'{{"lr": [0.0001, 0.001]}}; got {grid!r}')
    for name, values in grid.items():
        if not isinstance(values, list):
            raise ConfigError(f"{owner}: {name!r} must be a list of values to "
                              f"try, e.g. [{values!r}]; got {values!r}")
        if not values:
            raise ConfigError(f"{owner}: {name!r} is an empty list, so there "
                              "would be nothing to try; give at least one value or leave "
                              f"{name!r} out to keep the default")
        for value in values:
            validate_params(owner, {name: value}, accepted, constraints)


__all__ = ["SEED", "Boolean", "Constraint", "Interval", "Options", "check_grid", "check_value",
           "describe", "did_you_mean", "validate_params"]
