"""A fitted method's meaning part as plain affine layers, per language where it needs one.

Every exportable method computes its meaning part from the (normalised, cached) encoder
embedding ``e (n, d)`` with a few affine layers:

=====================  ==========================================  ====================
method                 meaning part                                depends on language
=====================  ==========================================  ====================
baseline               ``m = e``                                   no
seed, intra/inter/both ``m = W e + b`` (SEED's residual head)      no
dream, meat, oracle*   ``m = MLP_m(e)``: ``W e + b``, or            no
                       ``W2 relu(W1 e + b1) + b2`` with ``hidden``
any ``*-centered``     ``m = head(e - mu_lang)``                    yes
mean-centering         ``m = e - mu_lang``                          yes
linear-map             ``m = A_lang e + b_lang`` (identity for      yes
                       the pivot)
=====================  ==========================================  ====================

:func:`meaning_map` returns that as data (numpy weights, no torch modules), which
the sentence-transformers export and the tests read; :func:`apply_map` runs it in numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from torch import nn

from ..exceptions import ConfigError
from ..methods import Baseline, Disentangler, LinearMap, MeanCentering, NeuralDisentangler

Activation = Literal["identity", "relu"]

#: route name of mean-centering's fallback: the mean over all training languages
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
    """The meaning part of one fitted method.

    ``routes`` maps a route name to its layers; a language-independent map has the one
    route ``""``. A language-dependent map has one route per language (plus
    :data:`GLOBAL_ROUTE` for mean-centering), chosen by the caller.
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


def _identity(dim: int, bias: np.ndarray | None = None) -> Affine:
    return Affine(np.eye(dim, dtype=np.float32),
                  np.zeros(dim, np.float32) if bias is None else bias.astype(np.float32))


def torch_layers(module: nn.Module) -> list[Affine]:
    """``nn.Linear`` / ``nn.Sequential(Linear, ReLU, Linear, ...)`` as :class:`Affine` layers."""
    parts = list(module) if isinstance(module, nn.Sequential) else [module]
    out: list[Affine] = []
    for part in parts:
        if isinstance(part, nn.Linear):
            bias = part.bias.detach().numpy() if part.bias is not None else \
                np.zeros(part.out_features, np.float32)
            out.append(Affine(part.weight.detach().numpy().astype(np.float32).copy(),
                              bias.astype(np.float32).copy()))
        elif isinstance(part, nn.ReLU) and out and out[-1].activation == "identity":
            out[-1] = Affine(out[-1].weight, out[-1].bias, "relu")
        else:
            raise ConfigError(f"the meaning head holds a {type(part).__name__}, which has no "
                              "exported form (only Linear and ReLU layers do)")
    return out


def meaning_map(model: Disentangler) -> MeaningMap:
    """The meaning part of a fitted ``model`` as affine layers (see the module docstring)."""
    if not model.is_fitted:
        raise ConfigError(f"this {type(model).__name__} is not fitted; export a trained model")
    d = int(model.dim_)
    if isinstance(model, Baseline):
        return MeaningMap(model.method, d, {"": []}, False)
    if isinstance(model, NeuralDisentangler):
        head = getattr(model.head_, "meaning", None)
        if head is None:
            raise ConfigError(f"{model.method}'s head has no 'meaning' layer to export")
        layers = torch_layers(head)
        centering = getattr(model, "centering_", None)
        if centering is None:
            return MeaningMap(model.method, d, {"": layers}, False)
        centred = _centering_map(centering, d)  # m = head(e - mu_lang): one route per language
        return MeaningMap(model.method, d, {k: v + layers for k, v in centred.routes.items()},
                          True, centred.notes)
    if isinstance(model, MeanCentering):
        return _centering_map(model, d)
    if isinstance(model, LinearMap):
        routes = {lang: [Affine(A.astype(np.float32), b.astype(np.float32))]
                  for lang, (A, b) in model.maps_.items()}
        routes[model.pivot] = [_identity(d)]
        notes = [f"route {model.pivot!r} (the pivot) is the identity; languages without a map "
                 f"pass through unchanged in disembed (unknown_language='identity'): use the "
                 f"{model.pivot!r} route for them"]
        return MeaningMap(model.method, d, routes, True, notes)
    raise ConfigError(f"{model.method} has no exported form yet (exportable: baseline, the "
                      "trained recipes, mean-centering, linear-map); serve it with "
                      "'disembed serve --model DIR' instead")


def _centering_map(centering: MeanCentering, d: int) -> MeaningMap:
    """``m = e - mu_lang``: one route per training language and the global mean's route."""
    routes = {lang: [_identity(d, -mu)] for lang, mu in zip(centering.languages_,
                                                             centering.means_, strict=True)}
    routes[GLOBAL_ROUTE] = [_identity(d, -centering.means_.mean(axis=0))]
    notes = [f"route {GLOBAL_ROUTE!r} subtracts the mean over all training languages "
             "(disembed's unknown_language='global'); disembed's default for unseen "
             "languages ('batch': the mean of the rows being encoded) has no exported form"]
    return MeaningMap(centering.method, d, routes, True, notes)


def apply_map(mmap: MeaningMap, X: np.ndarray, language: str | None = None) -> np.ndarray:
    """Run ``mmap`` on ``X (n, d) float32``; ``language`` picks the route of a routed map."""
    key = language if mmap.by_language else ""
    if key not in mmap.routes:
        raise ConfigError(f"{mmap.method} has no route {language!r}; routes: {sorted(mmap.routes)}")
    out = np.asarray(X, np.float32)
    for layer in mmap.routes[key]:
        out = layer(out)
    return out.astype(np.float32)
