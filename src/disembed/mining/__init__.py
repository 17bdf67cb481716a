"""Parallel-sentence mining: k-NN search, margin scores, mine / score / search.

Numpy in, numpy out, block by block; faiss and Ray are optional and imported lazily.
"""

from ..retrieval.knn import KnnOptions, brute_force_knn, knn, knn_both, normalize_rows, rescore
from ..retrieval.margin import MARGINS, MODES, candidates, margin, pair_scores, select
from ..retrieval.search import BACKENDS, search, search_both
from .collection import Collection
from .embed import embed_collection
from .mine import (
    MineConfig,
    Mined,
    Searched,
    mine_embeddings,
    mine_files,
    search_files,
    write_pairs,
)
from .score import SCORE_KINDS, score_embeddings, score_tsv

__all__ = [
    "BACKENDS", "Collection", "KnnOptions", "MARGINS", "MODES", "MineConfig", "Mined",
    "SCORE_KINDS", "Searched", "brute_force_knn", "candidates", "embed_collection", "knn",
    "knn_both",
    "margin", "mine_embeddings", "mine_files", "normalize_rows", "pair_scores", "rescore",
    "score_embeddings", "score_tsv", "search", "search_both", "search_files", "select",
    "write_pairs",
]
