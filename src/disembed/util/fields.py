"""One constraint declaration per config field, and everything made from it.

A config dataclass declares what each checked field accepts, with the constraint types of
:mod:`.constraints` (scikit-learn's ``_parameter_constraints`` pattern)::

    @dataclass(frozen=True)
    class Workspace:
        _field_constraints: ClassVar = {"batch_size": [Interval(int, 1, None)]}
        batch_size: int = 64

        def __post_init__(self) -> None:
            check_fields(self)

From that one declaration come the ``__post_init__`` check (:func:`check_fields`), the
command line's argument type (:func:`arg_type`: parses the text, then checks the same
constraints; ``None`` is spelt ``all``) and the values a test feeds it to see it refused
(:func:`bad_values`).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Iterable

from ..exceptions import ConfigError
from .constraints import Boolean, Constraint, Interval, Options, check_value, describe


def declared(cls: type) -> dict[str, list[Constraint]]:
    """The field constraints ``cls`` declares (``_field_constraints``), with its bases'."""
    out: dict[str, list[Constraint]] = {}
    for klass in reversed(cls.__mro__):
        out.update(getattr(klass, "_field_constraints", {}) or {})
    return out


def _accepted(value: Any, constraints: list[Constraint]) -> bool:
    try:
        check_value("", "", value, constraints)
    except ConfigError:
        return False
    return True


def plain(constraints: Iterable[Constraint], noun: str | None = None,
          none: str = "None") -> str:
    """What ``constraints`` accept in words: ``"a positive integer"``, ``"an integer >= 20
    or None"`` (``noun`` instead of "an integer", ``none`` instead of "None")."""
    parts = []
    for c in constraints:
        if c is None:
            parts.append(none)
        elif isinstance(c, Interval) and c.kind is int and c.high is None and c.low == 1 \
                and noun is None:
            parts.append("a positive integer")
        elif isinstance(c, Interval) and c.high is None and c.low is not None \
                and c.closed in ("both", "left"):
            parts.append(f"{noun or ('an integer' if c.kind is int else 'a number')} >= "
                         f"{c.low:g}")
        else:
            parts.append(describe([c]))
    return " or ".join(parts)


def check_fields(obj: Any) -> None:
    """Raise ``ConfigError`` naming the first declared field of ``obj`` whose value breaks
    its constraints: what was given, what is accepted."""
    owner = type(obj).__name__
    for name, constraints in declared(type(obj)).items():
        value = obj
        for part in name.split("."):  # "data.holdout_per_language": a held config's field
            value = getattr(value, part)
        if not _accepted(value, constraints):
            raise ConfigError(f"{owner}: {name} must be {plain(constraints)}; got {value!r} "
                              f"({type(value).__name__}). Fix the value of {name!r}")


def arg_type(cls: type, name: str, *, noun: str | None = None,
             none_word: str = "all") -> Callable[[str], Any]:
    """An argparse ``type=`` for field ``name`` of ``cls``: the text parsed by the kind its
    constraints name (``none_word`` for ``None`` where allowed), then checked by them;
    ``noun`` names the quantity in the error ("a number of pairs per language")."""
    constraints = declared(cls)[name]
    allows_none = None in constraints
    kinds = [c.kind for c in constraints if isinstance(c, Interval)]
    shown = plain(constraints, noun, repr(none_word))

    def parse(text: str) -> Any:
        if allows_none and text.strip().lower() == none_word:
            return None
        value: Any = text
        for kind in kinds:
            try:
                value = kind(text)
                break
            except ValueError:
                continue
        if not _accepted(value, constraints):
            raise argparse.ArgumentTypeError(f"expected {shown}, got {text!r}")
        return value

    parse.__name__ = f"{cls.__name__}.{name}"
    return parse


def bad_values(constraints: Iterable[Constraint]) -> list[Any]:
    """Values each of ``constraints`` refuses and none accepts (for the bad-value tests)."""
    constraints = list(constraints)
    candidates: list[Any] = ["not-a-value", True]
    for c in constraints:
        if isinstance(c, Interval):
            if c.low is not None:
                candidates += [c.low - 1, c.low - 0.5]
            if c.high is not None:
                candidates += [c.high + 1]
            candidates += [float("nan"), 2.5 if c.kind is int else None]
        elif isinstance(c, Options):
            candidates += [f"{c.values[0]}-not", 0]
        elif isinstance(c, Boolean):
            candidates += [1, "yes"]
    if None not in constraints:
        candidates.append(None)
    out: list[Any] = []
    for value in candidates:
        if not _accepted(value, constraints) and not any(
                value is v or (value == v and type(value) is type(v)) for v in out):
            out.append(value)
    return out


__all__ = ["arg_type", "bad_values", "check_fields", "declared", "plain"]
