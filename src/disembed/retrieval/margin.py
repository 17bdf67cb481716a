"""Margin scores (Artetxe & Schwenk, 2019) and candidate pairs from two k-NN lists.

For source ``x`` and target ``y`` with k-NN lists in both directions::

    a(x) = sum_{z in NN_k(x)} cos(x, z) / 2k      b(y) = sum_{z in NN_k(y)} cos(y, z) / 2k
    ratio:    cos(x, y) / (a(x) + b(y))
    distance: cos(x, y) - (a(x) + b(y))
    absolute: cos(x, y)

Candidates come from the lists (Artetxe & Schwenk, 2019, sec. 3.2):

- ``forward``: each source with its best-scoring target among its k neighbours;
- ``backward``: each target with its best-scoring source among its k neighbours;
- ``intersection``: pairs found in both directions;
- ``max-score``: forward and backward candidates together, best score first,
  keeping a pair only if neither its source nor its target was taken yet (as in
  the LASER ``mine_bitexts.py`` "max" retrieval).

All functions are pure numpy over the outputs of a k-NN search:
``D_xy (n, k)``, ``I_xy (n, k)`` (targets of each source) and ``D_yx (m, k)``,
``I_yx (m, k)`` (sources of each target).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..exceptions import ConfigError, ShapeError

Margin = Literal["ratio", "distance", "absolute"]
Mode = Literal["forward", "backward", "max-score", "intersection"]
MARGINS = ("ratio", "distance", "absolute")
MODES = ("forward", "backward", "max-score", "intersection")


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def neighbour_mean(D: np.ndarray) -> np.ndarray:
    """``(n,)`` mean similarity of each row to its k neighbours (``D (n, k)``)."""
    return np.asarray(D, dtype=np.float64).mean(axis=1)


def margin(cos: np.ndarray, mean_x: np.ndarray, mean_y: np.ndarray,
           kind: Margin = "ratio") -> np.ndarray:
    """Score pairs from their cosine and the neighbour means of both sides (all ``(p,)``).

    ``(mean_x + mean_y) / 2`` equals ``a(x) + b(y)`` in the module equation.
    """
    check_choice("margin", kind, MARGINS)
    cos = np.asarray(cos, dtype=np.float64)
    if kind == "absolute":
        return cos
    denom = (np.asarray(mean_x, dtype=np.float64) + np.asarray(mean_y, dtype=np.float64)) / 2
    return cos / denom if kind == "ratio" else cos - denom


def _check_lists(D_xy, I_xy, D_yx, I_yx) -> None:
    if D_xy.shape != I_xy.shape or D_yx.shape != I_yx.shape:
        raise ShapeError(f"distance and index lists differ in shape: {D_xy.shape} vs "
                         f"{I_xy.shape}, {D_yx.shape} vs {I_yx.shape}")
    if D_xy.ndim != 2 or D_yx.ndim != 2:
        raise ShapeError(f"k-NN lists must be 2-d (n, k), got {D_xy.shape} and {D_yx.shape}")


def _best_per_row(D, I, mean_q, mean_db, kind):  # noqa: E741
    """For each query row, its best-scoring neighbour: ``(score (n,), neighbour (n,))``."""
    scores = margin(D, mean_q[:, None], mean_db[I], kind)  # (n, k)
    best = np.argmax(scores, axis=1)
    rows = np.arange(len(D))
    return scores[rows, best], I[rows, best]


def candidates(D_xy: np.ndarray, I_xy: np.ndarray, D_yx: np.ndarray, I_yx: np.ndarray,
               mode: Mode = "max-score", kind: Margin = "ratio"
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs as ``(score (p,) float64, src (p,) int64, tgt (p,) int64)``, best first.

    Pairs are unique by ``(src, tgt)``; ties in score are broken by ``src`` then ``tgt``.
    """
    check_choice("mode", mode, MODES)
    check_choice("margin", kind, MARGINS)
    _check_lists(D_xy, I_xy, D_yx, I_yx)
    mean_x, mean_y = neighbour_mean(D_xy), neighbour_mean(D_yx)
    fwd_s, fwd_t = _best_per_row(D_xy, I_xy, mean_x, mean_y, kind)
    fwd_src = np.arange(len(D_xy))
    bwd_s, bwd_src = _best_per_row(D_yx, I_yx, mean_y, mean_x, kind)
    bwd_tgt = np.arange(len(D_yx))
    if mode == "forward":
        return _sorted(fwd_s, fwd_src, fwd_t)
    if mode == "backward":
        return _sorted(bwd_s, bwd_src, bwd_tgt)
    if mode == "intersection":
        keep = bwd_src[fwd_t] == fwd_src  # the backward best source of each forward target
        return _sorted(fwd_s[keep], fwd_src[keep], fwd_t[keep])
    score, src, tgt = _sorted(np.concatenate([fwd_s, bwd_s]), np.concatenate([fwd_src, bwd_src]),
                              np.concatenate([fwd_t, bwd_tgt]))
    return _greedy_one_to_one(score, src, tgt, len(D_xy), len(D_yx))


def _sorted(score, src, tgt):
    """Unique ``(src, tgt)`` pairs, best score first (ties: lower src, then lower tgt)."""
    order = np.lexsort((tgt, src, -score))
    score, src, tgt = score[order], src[order], tgt[order]
    _, first = np.unique(np.stack([src, tgt], axis=1), axis=0, return_index=True)
    first = np.sort(first)
    return score[first], src[first].astype(np.int64), tgt[first].astype(np.int64)


def _greedy_one_to_one(score, src, tgt, n_src, n_tgt):
    """Walk pairs best first; keep one only if its source and target are both still free."""
    used_src = np.zeros(n_src, dtype=bool)
    used_tgt = np.zeros(n_tgt, dtype=bool)
    keep = np.zeros(len(score), dtype=bool)
    for p, (s, t) in enumerate(zip(src.tolist(), tgt.tolist(), strict=True)):
        if not used_src[s] and not used_tgt[t]:
            used_src[s] = used_tgt[t] = keep[p] = True
    return score[keep], src[keep], tgt[keep]


def select(score: np.ndarray, *, threshold: float | None = None, top: int | None = None
           ) -> np.ndarray:
    """Boolean mask of ``score (p,)`` (sorted best first) kept by a threshold and/or top-N."""
    keep = np.ones(len(score), dtype=bool)
    if threshold is not None:
        keep &= score >= threshold
    if top is not None:
        if top < 0:
            raise ConfigError(f"top must be >= 0, got {top}")
        keep &= np.arange(len(score)) < top
    return keep


def pair_scores(cos: np.ndarray, D_src: np.ndarray, D_tgt: np.ndarray,
                kind: Margin = "ratio") -> np.ndarray:
    """Margin of given aligned pairs: ``cos (p,)``, the k-NN similarities of each source
    ``D_src (p, k)`` and each target ``D_tgt (p, k)`` in the reference pools."""
    return margin(cos, neighbour_mean(D_src), neighbour_mean(D_tgt), kind)
