"""One entry point over the k-NN backends: ``exact`` (ours) and ``faiss-{flat,ivf,hnsw}``.

``exact`` multiplies in bfloat16 where the hardware probe measures it faster (with
certified float32 re-scoring, so the lists equal float32 brute force), in float32
elsewhere; ``exact-fp32`` and ``exact-bf16`` force one precision.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..exceptions import ConfigError
from .knn import KnnOptions, knn, knn_both

logger = logging.getLogger(__name__)

BACKENDS = ("exact", "exact-fp32", "exact-bf16", "faiss-flat", "faiss-ivf", "faiss-hnsw")
_PRECISION = {"exact": "auto", "exact-fp32": "float32", "exact-bf16": "bfloat16"}


def _faiss_options(backend: str, **options):
    from .faiss_backend import FaissOptions

    return FaissOptions(index=backend.split("-", 1)[1], **options)


def _exact_options(backend: str, **options) -> KnnOptions:
    return KnnOptions(**{"precision": _PRECISION[backend], **options})


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def search(queries: np.ndarray, database: np.ndarray, k: int = 4, backend: str = "exact",
           **options) -> tuple[np.ndarray, np.ndarray]:
    """k-NN by inner product: ``D (nq, k) float32``, ``I (nq, k) int64``."""
    check_backend(backend)
    if backend.startswith("faiss"):
        from .faiss_backend import faiss_knn

        return faiss_knn(queries, database, k, _faiss_options(backend, **options))
    return knn(queries, database, k, _exact_options(backend, **options))


def search_both(x: np.ndarray, y: np.ndarray, k: int = 4, backend: str = "exact", **options
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """k-NN lists in both directions: ``D_xy, I_xy (n, k)`` and ``D_yx, I_yx (m, k)``.

    The exact backend computes them from one pass of products; faiss builds two indexes.
    """
    check_backend(backend)
    t0 = time.perf_counter()
    if backend.startswith("faiss"):
        from .faiss_backend import faiss_knn

        opt = _faiss_options(backend, **options)
        out = (*faiss_knn(x, y, k, opt), *faiss_knn(y, x, k, opt))
    else:
        out = knn_both(x, y, k, _exact_options(backend, **options))
    logger.info("k-NN %s: %d x %d, k=%d in %.1fs", backend, len(x), len(y), k,
                time.perf_counter() - t0)
    return out
