"""Embedding dimensionality: train and evaluate on the first ``k`` dimensions.

Matryoshka-style truncation (Kusupati et al. 2022): keep the first ``k`` coordinates of
every encoder embedding, fit each method on those and evaluate it, for a sweep of ``k``.
Encoders not trained with a Matryoshka loss spread information over all coordinates,
so this measures how much of the split survives a cheap dimensionality cut.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from ..exceptions import ConfigError, ShapeError

logger = logging.getLogger(__name__)


def truncate(X: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` columns of ``X (n, d)`` -> ``(n, k)`` float32 (a contiguous copy)."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ShapeError(f"truncate needs an (n, d) array; got shape {X.shape}")
    if not 1 <= k <= X.shape[1]:
        raise ConfigError(f"k must be in [1, {X.shape[1]}] for {X.shape[1]}-d embeddings; "
                          f"got {k}")
    return np.ascontiguousarray(X[:, :k], dtype=np.float32)


class TruncatedEncoder:
    """An encoder whose embeddings are the first ``k`` dimensions of ``encoder``'s."""

    def __init__(self, encoder: Any, k: int) -> None:
        if not 1 <= k <= encoder.dim:
            raise ConfigError(f"k must be in [1, {encoder.dim}] for encoder {encoder.name}; "
                              f"got {k}")
        self.encoder, self.k = encoder, int(k)
        self.name, self.dim = f"{encoder.name}[:{k}]", int(k)
        inner = encoder.identity
        self.identity = replace(inner, dim=self.dim,
                                extra=tuple(inner.extra) + (("truncate", str(k)),))
        self.languages = getattr(getattr(encoder, "encoder", encoder), "languages", None)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        return truncate(self.encoder.encode(texts, batch_size=batch_size), self.k)


def truncation_sweep(methods: Sequence[str], encoder: Any, pairs: Any, ks: Sequence[int], *,
                     tasks: Sequence[str] = ("tatoeba", "sts17"),
                     task_options: Mapping[str, Mapping[str, Any]] | None = None,
                     method_params: Mapping[str, Mapping[str, Any]] | None = None,
                     data_dir: Any = None) -> list[dict]:
    """Fit and evaluate every method at every ``k``; one row per (k, method, task).

    Rows: ``{"k", "method", "task", "metric", "meaning", "language"}`` (main scores; the
    language score is ``nan`` for methods without a language part).
    """
    from ..pipeline import evaluate, fit_method

    rows = []
    for k in sorted(set(int(k) for k in ks)):
        trunc = TruncatedEncoder(encoder, k)
        for method in methods:
            model = fit_method(method, trunc, pairs, params=dict((method_params or {}).get(
                method, {})))
            for s in evaluate(model, trunc, tasks, task_options=task_options,
                              data_dir=data_dir):
                rows.append({"k": k, "method": method, "task": s.task, "metric": s.main_metric,
                             "meaning": s.main_score("meaning"),
                             "language": s.main_score("language") if "language" in s.views()
                             else float("nan")})
            logger.info("truncation k=%d %s: %s", k, method,
                        {r["task"]: round(r["meaning"], 3) for r in rows[-len(tasks):]})
    return rows
