"""A fitted recipe's meaning part as plain affine layers: what each recipe's
:meth:`~disembed.methods.Disentangler.meaning_map` returns and the export writes.

Every exportable recipe computes its meaning part from the (normalised, cached) encoder
embedding ``e (n, d)`` with a few affine layers, one route of layers per language where
the meaning depends on the language (the recipe's ``uses_language``):

=====================  ==========================================  ====================
recipe                 meaning part                                depends on language
=====================  ==========================================  ====================
baseline               ``m = e``                                   no
seed, intra/inter/both ``m = W e + b`` (SEED's residual head)      no
dream, meat, oracle*   ``m = MLP_m(e)``: ``W e + b``, or            no
                       ``W2 relu(W1 e + b1) + b2`` with ``hidden``
lsar                   ``m = (I - M M^T) e``                        no
leace                  ``m = (I - L R) e + L R mu``                 no
any ``*-centered``     ``m = head(e - mu_lang)``                    yes
mean-centering         ``m = e - mu_lang``                          yes
lir                    ``m = (I - C_lang C_lang^T) e``              yes
linear-map             ``m = A_lang e + b_lang`` (identity for      yes
                       the pivot)
=====================  ==========================================  ====================

The maps are data (numpy weights, no torch modules): the sentence-transformers export
turns them into ``Dense`` / ``Router`` modules, :func:`apply_map` runs them in numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..exceptions import ConfigError

Activation = Literal["identity", "relu"]

#: route name of the fallback for languages without their own route: the training mean
GLOBAL_ROUTE = "global"


@dataclass(frozen=True)
class Affine:
    """``y = act(x W^T + b)``: ``W (out, in) float32``, ``b (out,) float32``."""

    weight: np.ndarray
    bias: np.ndarray
    activation: Activation = "identity"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.weight.T + self.bias
        return np.maximum(y, 0) if self.activation == "relu" else y


@dataclass
class MeaningMap:
    """The meaning part of one fitted recipe.

    ``routes`` maps a route name to its layers; a language-independent map has the one
    route ``""``. A language-dependent map has one route per language (plus
    :data:`GLOBAL_ROUTE` where the recipe has a global fallback), chosen by the caller.
    """

    method: str
    dim: int
    routes: dict[str, list[Affine]]
    by_language: bool
    notes: list[str] = field(default_factory=list)

    @property
    def out_dim(self) -> int:
        layers = next(iter(self.routes.values()))
        return int(layers[-1].weight.shape[0]) if layers else self.dim


def affine(weight: np.ndarray, bias: np.ndarray | None = None,
           activation: Activation = "identity") -> Affine:
    """An :class:`Affine` layer in float32 (zero bias when ``bias`` is ``None``)."""
    weight = np.ascontiguousarray(weight, dtype=np.float32)
    bias = np.zeros(weight.shape[0], np.float32) if bias is None else bias
    return Affine(weight, np.ascontiguousarray(bias, dtype=np.float32), activation)


def identity_layer(dim: int, bias: np.ndarray | None = None) -> Affine:
    """``y = x + bias``."""
    return affine(np.eye(dim, dtype=np.float32), bias)


def single_route(method: str, dim: int, layers: list[Affine]) -> MeaningMap:
    """A language-independent map."""
    return MeaningMap(method, dim, {"": layers}, False)


def centering_routes(languages: list[str], means: np.ndarray, dim: int
                     ) -> tuple[dict[str, list[Affine]], list[str]]:
    """``m = e - mu_lang``: one route per training language and the global mean's route."""
    routes = {lang: [identity_layer(dim, -mu)] for lang, mu in zip(languages, means,
                                                                     strict=True)}
    routes[GLOBAL_ROUTE] = [identity_layer(dim, -means.mean(axis=0))]
    notes = [f"route {GLOBAL_ROUTE!r} subtracts the mean over all training languages "
             "(disembed's unknown_language='global', its default for a language it never "
             "saw)"]
    return routes, notes


def apply_map(mmap: MeaningMap, X: np.ndarray, language: str | None = None) -> np.ndarray:
    """Run ``mmap`` on ``X (n, d) float32``; ``language`` picks the route of a routed map."""
    key = language if mmap.by_language else ""
    if key not in mmap.routes:
        raise ConfigError(f"{mmap.method} has no route {language!r}; routes: {sorted(mmap.routes)}")
    out = np.asarray(X, np.float32)
    for layer in mmap.routes[key]:
        out = layer(out)
    return out.astype(np.float32)


__all__ = ["GLOBAL_ROUTE", "Affine", "MeaningMap", "affine", "apply_map", "centering_routes",
           "identity_layer", "single_route"]
