"""One entry point over the k-NN backends: ``exact`` (ours), ``approx`` / ``approx-pq``
(faiss IVF with ``nprobe`` chosen by a measured recall target, :mod:`.approximate`),
``auto`` (exact below :data:`EXACT_UP_TO` products; above, whichever of the two is
projected cheaper from rates measured on a sample, :mod:`.auto`) and
``faiss-{flat,ivf,hnsw}`` (faiss with hand-set parameters).

``exact`` multiplies in bfloat16 where the hardware probe measures it faster (with
certified float32 re-scoring, so the lists equal float32 brute force), in float32
elsewhere; ``exact-fp32`` and ``exact-bf16`` force one precision.
"""

from __future__ import annotations

import importlib.util
import logging
import time

import numpy as np

from ..exceptions import ConfigError, NonFiniteError
from .approximate import ApproximateOptions, approximate_both, approximate_knn
from .auto import measured_both, measured_one
from .faiss_backend import FaissOptions, faiss_knn
from .knn import KnnOptions, canonical_lists, knn, knn_both

logger = logging.getLogger(__name__)

BACKENDS = ("exact", "exact-fp32", "exact-bf16", "auto", "approx", "approx-pq", "faiss-flat",
            "faiss-ivf", "faiss-hnsw")
APPROXIMATE = {"approx": "ivf", "approx-pq": "ivfpq"}
# ``auto`` searches exactly while n x m stays at or below this many products (building and
# calibrating an index costs more than the exact search there: BUCC, docs/mining.md); above
# it, the two paths' rates are measured on a sample and the cheaper one runs (:mod:`.auto`)
EXACT_UP_TO = 200_000 * 200_000
_PRECISION = {"exact": "auto", "exact-fp32": "float32", "exact-bf16": "bfloat16"}


def _faiss_options(backend: str, **options):
    return FaissOptions(index=backend.split("-", 1)[1], **options)


def _exact_options(backend: str, **options) -> KnnOptions:
    return KnnOptions(**{"precision": _PRECISION[backend], **options})


def _approximate_options(backend: str, **options):
    return ApproximateOptions(index=APPROXIMATE[backend], **options)


def resolve_backend(backend: str, n: int, m: int) -> str:
    """``auto`` -> ``exact`` for ``n x m <= EXACT_UP_TO`` (or without faiss); above it stays
    ``auto``: :func:`search_both` then measures which path is cheaper. Others unchanged."""
    check_backend(backend)
    if backend != "auto":
        return backend
    if n * m <= EXACT_UP_TO:
        logger.info("backend auto: exact for %d x %d (at most %d products)", n, m, EXACT_UP_TO)
        return "exact"
    if importlib.util.find_spec("faiss") is None:
        logger.warning("%d x %d might search faster approximately, but faiss is not installed "
                       "(pip install 'disembed[faiss]'): searching exactly", n, m)
        return "exact"
    return "auto"


def _split_options(backend: str, options: dict) -> dict:
    """Recall options only reach the approximate backends (``auto`` may pick exact)."""
    if backend in APPROXIMATE:
        return options
    approx_only = {"recall", "nprobe", "nlist", "pq_bytes", "rerank", "sample",
                   "train_per_cell", "seed"}
    return {k: v for k, v in options.items() if k not in approx_only}


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def check_finite(**matrices: np.ndarray) -> None:
    """Every row of each named ``(n, d)`` matrix is finite, else a
    :class:`~disembed.exceptions.NonFiniteError` naming the matrix and its first bad row. A
    NaN similarity is never a neighbour, so one NaN row silently emptied a mining result.
    Checked block by block (memory-mapped matrices stay on disk)."""
    for name, X in matrices.items():
        if X is None:
            continue
        for r0 in range(0, len(X), _FINITE_BLOCK):
            ok = np.isfinite(np.asarray(X[r0:r0 + _FINITE_BLOCK])).reshape(
                min(_FINITE_BLOCK, len(X) - r0), -1).all(axis=1)
            if not ok.all():
                bad = r0 + int(np.argmin(ok))
                raise NonFiniteError(
                    f"{name} row {bad} holds NaN or infinite values ({int((~ok).sum())} such "
                    f"row(s) among rows {r0}-{r0 + len(ok) - 1}); every embedding must be "
                    "finite: drop or re-encode those rows")


_FINITE_BLOCK = 65536


def search(queries: np.ndarray, database: np.ndarray, k: int = 4, backend: str = "exact",
           **options) -> tuple[np.ndarray, np.ndarray]:
    """k-NN by inner product: ``D (nq, k) float32``, ``I (nq, k) int64``; every row must be
    finite (:func:`check_finite`)."""
    check_finite(queries=queries, database=database)
    backend = resolve_backend(backend, len(queries), len(database))
    if backend == "auto":

        return measured_one(queries, database, k, _approximate_options("approx", **options),
                            lambda q, d, kk: knn(q, d, kk, _exact_options(
                                "exact", **_split_options("exact", options))))
    options = _split_options(backend, options)
    if backend in APPROXIMATE:

        return approximate_knn(queries, database, k,
                               _approximate_options(backend, **options))[:2]
    if backend.startswith("faiss"):

        return faiss_knn(queries, database, k, _faiss_options(backend, **options))
    return knn(queries, database, k, _exact_options(backend, **options))


def search_both(x: np.ndarray, y: np.ndarray, k: int = 4, backend: str = "exact", **options
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """k-NN lists in both directions: ``D_xy, I_xy (n, k)`` and ``D_yx, I_yx (m, k)``.

    The exact backend computes them from one pass of products; faiss builds two indexes.
    Similarities are recomputed pair by pair (:func:`~.knn.canonical_lists`), so they do
    not depend on how the search was blocked or sharded.
    """
    return search_both_using(x, y, k, backend, **options)[0]


def search_both_using(x: np.ndarray, y: np.ndarray, k: int = 4, backend: str = "exact",
                      **options) -> tuple[tuple[np.ndarray, ...], str]:
    """:func:`search_both` and the backend that ran (what ``auto`` chose)."""
    check_finite(x=x, y=y)
    backend = resolve_backend(backend, len(x), len(y))
    t0 = time.perf_counter()
    if backend == "auto":

        exact_opt = _exact_options("exact", **_split_options("exact", options))
        out, backend = measured_both(x, y, k, _approximate_options("approx", **options),
                                     lambda a, b, kk: knn_both(a, b, kk, exact_opt))
        return _canonical(x, y, out, backend, k, t0), backend
    options = _split_options(backend, options)
    if backend in APPROXIMATE:

        out = approximate_both(x, y, k, _approximate_options(backend, **options))
    elif backend.startswith("faiss"):

        opt = _faiss_options(backend, **options)
        out = (*faiss_knn(x, y, k, opt), *faiss_knn(y, x, k, opt))
    else:
        out = knn_both(x, y, k, _exact_options(backend, **options))
    return _canonical(x, y, out, backend, k, t0), backend


def _canonical(x, y, out, backend: str, k: int, t0: float) -> tuple[np.ndarray, ...]:
    out = (*canonical_lists(x, y, out[0], out[1]), *canonical_lists(y, x, out[2], out[3]))
    logger.info("k-NN %s: %d x %d, k=%d in %.1fs", backend, len(x), len(y), k,
                time.perf_counter() - t0)
    return out
