"""An encoder cut to its first ``k`` dimensions (Matryoshka-style truncation).

Matryoshka-style truncation (Kusupati et al. 2022): keep the first ``k`` coordinates of
every embedding. Encoders not trained with a Matryoshka loss spread information over all
coordinates, so a dimension sweep measures how much of the split survives the cut.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from ..exceptions import ConfigError, ShapeError
from .base import check_batch_size, supported_languages, text_list


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
        self.languages = supported_languages(encoder)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        batch_size = check_batch_size(batch_size, self.name)
        texts = text_list(texts, self.name)
        return truncate(self.encoder.encode(texts, batch_size=batch_size), self.k)
