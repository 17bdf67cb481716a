"""Disentanglement methods, one recipe per file, all behind :class:`Disentangler`.

Trained recipes are presets over one library of weighted constraint terms
(:mod:`.constraints`). ``"oracle+<recipe>"`` composes ORACLE with any trained recipe
(``oracle+dream`` and ``oracle+meat`` are registered; others are built on demand).
"""

from __future__ import annotations

from ..exceptions import UnknownNameError
from ..registry import Registry
from .base import Disentangler, load_disentangler
from .baseline import Baseline
from .dream import Dream
from .intra_inter import Both, Inter, Intra
from .leace import Leace
from .linear_map import LinearMap
from .lir import Lir
from .lsar import Lsar
from .mean_centering import MeanCentering
from .meat import Meat
from .neural import NeuralDisentangler
from .oracle import Oracle, with_oracle
from .seed import Seed

OracleDream = with_oracle(Dream)
OracleMeat = with_oracle(Meat)

METHODS: Registry[type[Disentangler]] = Registry("method")
for _cls in (Baseline, MeanCentering, Seed):
    METHODS.add(_cls.method, _cls)
for _cls in (Dream, Meat, Oracle, OracleDream, OracleMeat, Intra, Inter, Both, LinearMap):
    METHODS.add(_cls.method, _cls)
for _cls in (Lir, Lsar, Leace):  # closed-form language erasure
    METHODS.add(_cls.method, _cls)

_COMPOSED: dict[str, type[Disentangler]] = {}


def composable() -> list[str]:
    """Registered trained recipes that ``oracle+<name>`` accepts."""
    return [n for n in METHODS if issubclass(METHODS.get(n), NeuralDisentangler)
            and "+" not in n and n != "oracle"]


def method_class(name: str) -> type[Disentangler]:
    """The class of method ``name``: a registered name, or ``"oracle+<trained recipe>"``."""
    if name in METHODS:
        return METHODS.get(name)
    parts = [p.strip() for p in name.split("+")]
    if len(parts) == 2 and "oracle" in parts:
        base_name = parts[1] if parts[0] == "oracle" else parts[0]
        canonical = f"oracle+{base_name}"
        if canonical in METHODS:
            return METHODS.get(canonical)
        base = METHODS.get(base_name)
        if base_name not in composable():
            raise UnknownNameError(f"cannot compose ORACLE with {base_name!r}; it composes with "
                                   f"one trained recipe: {', '.join(composable())}")
        if canonical not in _COMPOSED:
            _COMPOSED[canonical] = with_oracle(base)
        return _COMPOSED[canonical]
    return METHODS.get(name)  # raises with a "did you mean"


def make_method(name: str, **params) -> Disentangler:
    """A new, unfitted method by name (``"seed"``, ``"mean-centering"``, ``"oracle+meat"``...)."""
    return method_class(name)(**params)


__all__ = ["METHODS", "Baseline", "Both", "Disentangler", "Dream", "Inter", "Intra", "Leace",
           "LinearMap", "Lir", "Lsar", "MeanCentering", "Meat", "NeuralDisentangler", "Oracle",
           "OracleDream", "OracleMeat", "Seed", "composable", "load_disentangler", "make_method",
           "method_class"]
