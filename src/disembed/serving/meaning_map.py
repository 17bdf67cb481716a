"""A fitted method's meaning part as plain affine layers: the recipe says (its
:meth:`~disembed.methods.Disentangler.meaning_map`); see :mod:`disembed.methods.export_map`
for the forms and :func:`apply_map` to run one in numpy."""

from __future__ import annotations

from ..methods import GLOBAL_ROUTE, Affine, Disentangler, MeaningMap, apply_map


def meaning_map(model: Disentangler) -> MeaningMap:
    """The meaning part of a fitted ``model`` as affine layers (asked of the recipe)."""
    return model.meaning_map()


__all__ = ["GLOBAL_ROUTE", "Affine", "MeaningMap", "apply_map", "meaning_map"]
