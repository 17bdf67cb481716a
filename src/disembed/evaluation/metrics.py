"""Pure metric functions over arrays: bitext retrieval accuracy and correlations.

Correlations are stored raw, in [-1, 1]; multiplying by 100 is left to the report
tables. Degenerate inputs never raise and never warn: a constant (or near-constant)
input, fewer than two items or a non-finite value gives ``nan``; constant embeddings
give chance-level retrieval accuracy (ties are split evenly, see
:func:`retrieval_accuracy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.stats import rankdata

from ..exceptions import ShapeError

#: Cosines closer than this to a row's best count as tied with it. Identical vectors can
#: differ in the last bits after a matrix product, and must still count as ties.
TIE_TOLERANCE = 1e-7
#: A vector whose spread (max - min) is below this fraction of its scale is constant.
CONSTANT_TOLERANCE = 1e-9


def _as_matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise ShapeError(f"{name} must be a 2-D (n, d) array, got shape {x.shape}")
    return x.astype(np.float64, copy=False)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; an all-zero row stays zero (its cosines are 0).

    Args:
        x: (n, d). Returns (n, d) float64.
    """
    x = _as_matrix(x, "x")
    norms = np.linalg.norm(x, axis=1, keepdims=True)  # (n, 1)
    return x / np.where(norms > 0, norms, 1.0)


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each row of ``a`` with the same row of ``b``.

    Args:
        a, b: (n, d) arrays with equal shapes. Returns (n,) float64.
    """
    a, b = _as_matrix(a, "a"), _as_matrix(b, "b")
    if a.shape != b.shape:
        raise ShapeError(f"paired_cosine needs equal shapes; got a {a.shape} and b {b.shape}")
    return np.einsum("ij,ij->i", l2_normalize(a), l2_normalize(b))


@dataclass(frozen=True)
class RetrievalResult:
    """Bitext retrieval in both directions; row i of one side translates row i of the other.

    ``correct_*`` hold per-query credit in [0, 1] (1 = the gold row is the unique nearest
    neighbour; 1/k when it ties with k-1 others; 0 otherwise), for paired bootstrap.
    """

    main_metric: ClassVar[str] = "acc_mean"
    acc_a2b: float
    acc_b2a: float
    correct_a2b: np.ndarray  # (n,) float64
    correct_b2a: np.ndarray  # (n,) float64

    @property
    def acc_mean(self) -> float:
        return (self.acc_a2b + self.acc_b2a) / 2

    @property
    def main_score(self) -> float:
        return self.acc_mean


def _nearest_credit(queries: np.ndarray, keys: np.ndarray, block_size: int) -> np.ndarray:
    """Per-query credit for retrieving row i of ``keys`` for row i of ``queries`` (unit rows)."""
    n = queries.shape[0]
    credit = np.empty(n, dtype=np.float64)
    for start in range(0, n, block_size):
        stop = min(start + block_size, n)
        sims = queries[start:stop] @ keys.T  # (b, n)
        best = sims.max(axis=1, keepdims=True)  # (b, 1)
        tied = sims >= best - TIE_TOLERANCE  # (b, n) rows tied with the best
        gold_tied = tied[np.arange(stop - start), np.arange(start, stop)]  # (b,)
        credit[start:stop] = gold_tied / tied.sum(axis=1)
    return credit


def retrieval_accuracy(a: np.ndarray, b: np.ndarray, *, block_size: int = 1024) -> RetrievalResult:
    """Nearest-neighbour (cosine) retrieval accuracy from ``a`` to ``b`` and back.

    The similarity matrix is computed ``block_size`` query rows at a time, so memory is
    O(block_size * n). Ties are split evenly: a query whose gold row ties with k rows
    gets credit 1/k, the expected accuracy under random tie-breaking; constant embeddings
    therefore score exactly chance, 1/n.

    Args:
        a: (n, d) embeddings, row i translates row i of ``b``.
        b: (n, d) embeddings.
    """
    a, b = _as_matrix(a, "a"), _as_matrix(b, "b")
    if a.shape != b.shape:
        raise ShapeError(
            f"retrieval needs two (n, d) matrices of equal shape; got {a.shape} and {b.shape}"
        )
    if a.shape[0] == 0:
        raise ShapeError("retrieval needs at least one row, got 0")
    if block_size < 1:
        raise ShapeError(f"block_size must be >= 1, got {block_size}")
    a, b = l2_normalize(a), l2_normalize(b)
    a2b = _nearest_credit(a, b, block_size)
    b2a = _nearest_credit(b, a, block_size)
    return RetrievalResult(float(a2b.mean()), float(b2a.mean()), a2b, b2a)


def bitext_mining_f1(a: np.ndarray, b: np.ndarray, *, block_size: int = 1024) -> float:
    """MTEB's bitext-mining F1: each row of ``a`` predicts its nearest row of ``b`` by cosine
    (the first of tied rows); F1 of those predictions against the gold ``i -> i``,
    weighted by support (sklearn's ``f1_score(average="weighted")``, as MTEB computes it).

    With every gold label once, class j's F1 is ``2 / (1 + c_j)`` when row j predicted
    itself (``c_j``: rows predicting j) and 0 otherwise; the score is their mean. Ties are
    the one place it can differ from MTEB's own run, whose search orders tied rows its way.

    Args:
        a, b: (n, d) embeddings, row i translates row i. Returns a float in [0, 1].
    """
    a, b = _as_matrix(a, "a"), _as_matrix(b, "b")
    if a.shape != b.shape or a.shape[0] == 0:
        raise ShapeError(f"bitext mining needs two non-empty (n, d) matrices of equal shape; "
                         f"got {a.shape} and {b.shape}")
    a, b = l2_normalize(a), l2_normalize(b)
    n = a.shape[0]
    predicted = np.concatenate([np.argmax(a[i:i + block_size] @ b.T, axis=1)
                                for i in range(0, n, block_size)])  # (n,)
    counts = np.bincount(predicted, minlength=n)  # (n,) rows predicting each label
    hit = predicted == np.arange(n)  # (n,)
    per_label = np.zeros(n)
    per_label[np.arange(n)[hit]] = 2.0 / (1.0 + counts[hit])
    return float(per_label.mean())


def pooled_retrieval_accuracy(a: np.ndarray, b: np.ndarray, *, block_size: int = 1024
                              ) -> float:
    """Retrieval of each sentence's translation among *all* other sentences of both sides.

    The ``2n`` rows of ``a`` and ``b`` are pooled; every row queries the pool (itself left
    out) and gets credit when its nearest neighbour by cosine is its translation (ties
    split evenly, as in :func:`retrieval_accuracy`). Unlike xx->en retrieval, a
    same-language sentence can outrank the translation here, so embeddings that cluster
    by language lose: the criterion a language-agnostic meaning part should win.

    Args:
        a: (n, d) embeddings, row i translates row i of ``b`` (rows may mix languages).
        b: (n, d) embeddings.
    """
    a, b = _as_matrix(a, "a"), _as_matrix(b, "b")
    if a.shape != b.shape or a.shape[0] < 1:
        raise ShapeError(f"pooled retrieval needs two non-empty (n, d) matrices of equal shape; "
                         f"got {a.shape} and {b.shape}")
    pool = l2_normalize(np.concatenate([a, b]))  # (2n, d)
    n = len(a)
    gold = np.concatenate([np.arange(n, 2 * n), np.arange(n)])  # partner of each row
    credit = np.empty(2 * n)
    for start in range(0, 2 * n, block_size):
        rows = np.arange(start, min(start + block_size, 2 * n))
        sims = pool[rows] @ pool.T  # (block, 2n)
        sims[np.arange(len(rows)), rows] = -np.inf  # a sentence does not retrieve itself
        tied = sims >= sims.max(axis=1, keepdims=True) - TIE_TOLERANCE  # (block, 2n)
        credit[rows] = tied[np.arange(len(rows)), gold[rows]] / tied.sum(axis=1)
    return float(credit.mean())


def is_constant(x: np.ndarray) -> bool:
    """True when the values' spread is below :data:`CONSTANT_TOLERANCE` of their scale."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return True
    spread = float(x.max() - x.min())
    return spread <= CONSTANT_TOLERANCE * max(1.0, float(np.abs(x).max()))


def _check_pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ShapeError(
            f"correlation needs two (n,) arrays of equal length; got {x.size} and {y.size}"
        )
    return x, y


def _degenerate(x: np.ndarray, y: np.ndarray) -> bool:
    if x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return True
    return is_constant(x) or is_constant(y)


def _pearson_unchecked(x: np.ndarray, y: np.ndarray) -> float:
    xc, yc = x - x.mean(), y - y.mean()
    denom = float(np.sqrt((xc @ xc) * (yc @ yc)))
    if denom == 0.0:
        return float("nan")
    return float(np.clip((xc @ yc) / denom, -1.0, 1.0))


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation in [-1, 1] of two (n,) arrays; ``nan`` if either is constant."""
    x, y = _check_pair(x, y)
    return float("nan") if _degenerate(x, y) else _pearson_unchecked(x, y)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation in [-1, 1] (average ranks for ties); ``nan`` if constant."""
    x, y = _check_pair(x, y)
    if _degenerate(x, y):
        return float("nan")
    return _pearson_unchecked(rankdata(x), rankdata(y))


@dataclass(frozen=True)
class CorrelationResult:
    """Pearson and Spearman correlation, raw in [-1, 1] (``nan`` when undefined)."""

    main_metric: ClassVar[str] = "spearman"
    pearson: float
    spearman: float
    n: int

    @property
    def main_score(self) -> float:
        return self.spearman


def correlation(x: np.ndarray, y: np.ndarray) -> CorrelationResult:
    """Both correlations of two (n,) arrays at once."""
    x, y = _check_pair(x, y)
    return CorrelationResult(pearson(x, y), spearman(x, y), int(x.size))
