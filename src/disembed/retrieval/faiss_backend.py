"""faiss k-NN backends: exact ``IndexFlatIP`` and approximate IVF or HNSW (inner product).

Same contract as :mod:`.knn`: numpy in, ``D (nq, k) float32`` and ``I (nq, k) int64`` out.
faiss is optional: ``pip install "disembed[faiss]"``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..exceptions import ConfigError, require
from ..hardware import configure_threads

logger = logging.getLogger(__name__)

IndexKind = Literal["flat", "ivf", "hnsw"]
INDEX_KINDS = ("flat", "ivf", "hnsw")


def faiss_module():
    """The faiss module (an install hint where it is missing), on the process' threads."""
    faiss = require("faiss", "faiss", "the faiss search backend")
    # faiss brings its own OpenMP and OpenBLAS: give them the process' one thread count
    faiss.omp_set_num_threads(configure_threads(reapply=True).threads)
    return faiss


_faiss = faiss_module  # the name this module and retrieval.approximate use


@dataclass
class FaissOptions:
    """Index type and its knobs.

    Args:
        index: ``flat`` (exact), ``ivf`` (inverted lists over k-means cells) or ``hnsw`` (graph).
        nlist: IVF cells; default ``4 * sqrt(n)``.
        nprobe: IVF cells visited per query.
        hnsw_m: HNSW links per node.
        ef_search / ef_construction: HNSW beam widths.
        block: query rows per search call (bounds the memory of the results).
        seed: k-means seed (IVF).
    """

    index: IndexKind = "flat"
    nlist: int | None = None
    nprobe: int = 16
    hnsw_m: int = 32
    ef_search: int = 64
    ef_construction: int = 80
    block: int = 65536
    seed: int = 0

    def __post_init__(self) -> None:
        if self.index not in INDEX_KINDS:
            raise ConfigError(f"faiss index must be one of {INDEX_KINDS}, got {self.index!r}")


def build_index(database: np.ndarray, options: FaissOptions | None = None):
    """A faiss inner-product index over ``database (n, d)`` (added block by block)."""
    faiss, opt = _faiss(), options or FaissOptions()
    n, d = database.shape
    if opt.index == "flat":
        index = faiss.IndexFlatIP(d)
    elif opt.index == "hnsw":
        index = faiss.IndexHNSWFlat(d, opt.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = opt.ef_construction
    else:
        nlist = opt.nlist or max(1, min(n // 39, int(4 * np.sqrt(n))))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = opt.seed
        rng = np.random.default_rng(opt.seed)
        sample = np.sort(rng.choice(n, size=min(n, 256 * nlist), replace=False))
        index.train(np.ascontiguousarray(database[sample], dtype=np.float32))
    for start in range(0, n, opt.block):
        index.add(np.ascontiguousarray(database[start : start + opt.block], dtype=np.float32))
    _set_search_params(index, opt)
    return index


def _set_search_params(index, opt: FaissOptions) -> None:
    if opt.index == "ivf":
        index.nprobe = opt.nprobe
    elif opt.index == "hnsw":
        index.hnsw.efSearch = opt.ef_search


def search_index(index, queries: np.ndarray, k: int, block: int = 65536
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Search ``queries (nq, d)`` block by block: ``D (nq, k) float32``, ``I (nq, k) int64``."""
    if not 1 <= k <= index.ntotal:
        raise ConfigError(f"k must be between 1 and the index size {index.ntotal}, got {k}")
    D = np.empty((len(queries), k), dtype=np.float32)
    I = np.empty((len(queries), k), dtype=np.int64)  # noqa: E741
    for start in range(0, len(queries), block):
        q = np.ascontiguousarray(queries[start : start + block], dtype=np.float32)
        D[start : start + len(q)], I[start : start + len(q)] = index.search(q, k)
    return D, I


def faiss_knn(queries: np.ndarray, database: np.ndarray, k: int = 4,
              options: FaissOptions | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Build an index over ``database`` and search ``queries`` in it."""
    opt = options or FaissOptions()
    return search_index(build_index(database, opt), queries, k, opt.block)
