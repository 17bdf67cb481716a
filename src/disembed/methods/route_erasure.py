"""Erase the routing error from the meaning vector (issue 31, point 2).

An untagged row is the mixture of every language's route weighted by the identifier's
posterior (:mod:`.routing`). Where the recipe's routes differ only by a constant offset,
``route_k(x) = f(x) - o_k`` (mean-centering: ``o_k = mu_k``; a linear ``*-centered`` head
``W``: ``o_k = W mu_k``), the mixture's error against the right route,

    sum_k w_k route_k(x) - route_true(x) = o_true - sum_k w_k o_k,

lies in ``D = span{o_k - o_j}`` (rank ``L - 1``) whatever the weights. Every meaning vector,
tagged or not, is projected onto the orthogonal complement of ``D``'s top-``r`` principal
directions ``Q (d_m, r)``:

    m(x) <- (I - Q Q^T) m(x)

so most of the error a posterior's tail (or a wrong guess) makes is gone, and a tagged and
an untagged row of the same text differ only in the ``L - 1 - r`` weaker directions.
``r = 4`` (:data:`ROUTE_ERASURE_RANK`) was chosen on validation data (held-out training
pairs and WMT20 QE dev, untagged, per seed: docs/language_free.md, "Erasing the routing
error"); ``r = L - 1`` makes the untagged meaning independent of the weights but costs the
tagged rows more. ``Q`` is fitted with the model (from the routes of two probe inputs: the
zero vector and the identifier's training mean; a recipe whose routes differ by more than a
constant offset, e.g. ``lir`` or ``linear-map``, gets none), saved with it
(``route_erasure`` in ``model.safetensors``), and folded into the last layer of every
exported route. A model saved before it existed has none and is unchanged. A language
calibrated later keeps the fitted ``Q`` (its offset is erased only where it lies in ``D``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .export_map import MeaningMap, affine

#: how many principal directions of the routes' offsets are erased (chosen on validation)
ROUTE_ERASURE_RANK = 4
#: the tensor's name in ``model.safetensors``
STATE_KEY = "route_erasure"
#: how far the two probes' centred route outputs may differ (relative to their size) for
#: the routes to count as differing by a constant offset
OFFSET_TOLERANCE = 1e-3


def route_offsets(model: Any, x: np.ndarray) -> np.ndarray:
    """``(L, d_m) float64``: the meaning of the one row ``x (d,)`` by each of the identifier's
    languages' routes, centred across languages."""
    rows = np.asarray(x, np.float32)[None]
    out = np.concatenate([model.meaning(rows, code) for code in model.language_id_.languages_])
    out = out.astype(np.float64)
    return out - out.mean(axis=0)


def fit_route_erasure(model: Any, rank: int = ROUTE_ERASURE_RANK
                      ) -> np.ndarray | None:
    """``Q (d_m, r) float32``, the top-``r`` principal directions of the routes' offsets of a
    fitted ``model`` (``r = min(rank, L - 1)``, fewer where the offsets span fewer), or
    ``None`` where its routes differ by more than a constant offset or there is one
    language. ``model.route_erasure_`` must be ``None`` while this runs."""
    lid = getattr(model, "language_id_", None)
    if lid is None or len(lid.languages_) < 2:
        return None
    at_zero = route_offsets(model, np.zeros(model.dim_, np.float32))
    at_mean = route_offsets(model, lid.center_)
    scale = max(float(np.abs(at_zero).max()), float(np.abs(at_mean).max()), 1e-12)
    if float(np.abs(at_zero - at_mean).max()) > OFFSET_TOLERANCE * scale:
        return None  # x-dependent differences (lir, linear-map, an MLP head): no fixed D
    u, s, _ = np.linalg.svd(at_zero.T, full_matrices=False)  # (d_m, L)
    tol = s[0] * max(at_zero.shape) * np.finfo(np.float64).eps
    r = min(rank, len(lid.languages_) - 1, int((s > tol).sum()))
    return u[:, :r].astype(np.float32) if r > 0 else None


def erase(m: np.ndarray, Q: np.ndarray | None) -> np.ndarray:
    """``(I - Q Q^T) m`` for each row of ``m (n, d_m)`` (``m`` itself when ``Q`` is None)."""
    if Q is None:
        return m
    q = Q.astype(np.float64)
    m64 = np.asarray(m, np.float64)
    return (m64 - (m64 @ q) @ q.T).astype(np.float32)


def erase_map(mmap: MeaningMap, Q: np.ndarray | None) -> MeaningMap:
    """``mmap`` with ``I - Q Q^T`` folded into the last layer of every route (a layer added
    where the last ends in a ReLU)."""
    if Q is None:
        return mmap
    P = np.eye(Q.shape[0]) - Q.astype(np.float64) @ Q.astype(np.float64).T
    routes = {}
    for name, layers in mmap.routes.items():
        last = layers[-1] if layers else None
        if last is None or last.activation != "identity":
            routes[name] = [*layers, affine(P)]
            continue
        folded = affine(P @ last.weight.astype(np.float64), P @ last.bias.astype(np.float64))
        routes[name] = [*layers[:-1], folded]
    note = (f"every route ends in the projection erasing the {Q.shape[1]} principal "
            "directions of the differences between routes (issue 31: the routing error)")
    return dataclasses.replace(mmap, routes=routes, notes=[*mmap.notes, note])


__all__ = ["OFFSET_TOLERANCE", "ROUTE_ERASURE_RANK", "STATE_KEY", "erase", "erase_map",
           "fit_route_erasure", "route_offsets"]
