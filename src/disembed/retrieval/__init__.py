"""Nearest-neighbour search and margin scoring: numpy in, numpy out, no encoders or models.

The core under both the mining jobs (:mod:`disembed.mining`) and the BUCC evaluation task.
"""

from .knn import KnnOptions, brute_force_knn, knn, knn_both, normalize_rows, rescore
from .margin import MARGINS, MODES, candidates, margin, pair_scores, select
from .search import BACKENDS, search, search_both

__all__ = ["BACKENDS", "MARGINS", "MODES", "KnnOptions", "brute_force_knn", "candidates", "knn",
           "knn_both", "margin", "normalize_rows", "pair_scores", "rescore", "search",
           "search_both", "select"]
