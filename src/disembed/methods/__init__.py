"""Disentanglement methods, one recipe per file, all behind :class:`Disentangler`.

Trained recipes are presets over one library of weighted constraint terms
(:mod:`.constraints`). Some registered names are a recipe with hyperparameters switched
on (:mod:`.aliases`): ``oracle+dream``, ``oracle+meat`` (ORACLE's terms added),
``seed-centered`` (SEED on per-language-centred inputs); ``"oracle+<recipe>"`` composes
ORACLE with any trained recipe on demand.
"""

from __future__ import annotations

from ..registry import Registry
from . import aliases
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
from .oracle import Oracle
from .seed import Seed

METHODS: Registry[type[Disentangler]] = Registry("method")
for _cls in (Baseline, MeanCentering, Seed):
    METHODS.add(_cls.method, _cls)
for _cls in (Dream, Meat, Oracle, Intra, Inter, Both, LinearMap):
    METHODS.add(_cls.method, _cls)
for _cls in (Lir, Lsar, Leace):  # closed-form language erasure
    METHODS.add(_cls.method, _cls)

aliases.register_aliases(METHODS)


def composable() -> list[str]:
    """Registered trained recipes that ``oracle+<name>`` accepts."""
    return aliases.composable(METHODS)


def method_class(name: str) -> type[Disentangler]:
    """The class of method ``name``: a registered name, an alias or ``"oracle+<recipe>"``."""
    return aliases.resolve(METHODS, name)[0]


def make_method(name: str, **params) -> Disentangler:
    """A new, unfitted method by name (``"seed"``, ``"mean-centering"``, ``"oracle+meat"``...);
    an alias's switched-on hyperparameters are defaults under ``params``."""
    cls, switched_on = aliases.resolve(METHODS, name)
    return cls(**aliases.merge_params(name, switched_on, params))


__all__ = ["METHODS", "Baseline", "Both", "Disentangler", "Dream", "Inter", "Intra", "Leace",
           "LinearMap", "Lir", "Lsar", "MeanCentering", "Meat", "NeuralDisentangler", "Oracle",
           "Seed", "composable", "load_disentangler", "make_method", "method_class"]
