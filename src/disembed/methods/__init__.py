"""Disentanglement methods, one recipe per file, all behind :class:`Disentangler`."""

from __future__ import annotations

from ..registry import Registry
from .base import Disentangler, load_disentangler
from .baseline import Baseline
from .mean_centering import MeanCentering
from .seed import Seed

METHODS: Registry[type[Disentangler]] = Registry("method")
for _cls in (Baseline, MeanCentering, Seed):
    METHODS.add(_cls.method, _cls)


def make_method(name: str, **params) -> Disentangler:
    """A new, unfitted method by registry name (``"seed"``, ``"mean-centering"``, ...)."""
    return METHODS.get(name)(**params)


__all__ = ["METHODS", "Baseline", "Disentangler", "MeanCentering", "Seed", "load_disentangler",
           "make_method"]
