"""Property tests of k-NN and margin scoring against brute force, through the public
functions only (``knn``, ``knn_both``, ``search``, ``candidates``, ``score_embeddings``),
on arbitrary small shapes with ties, duplicate rows and zero rows.

Inputs hold small integers, so every product is exact in float32 (and bfloat16): a
result is right when its values equal the reference's, and with ties any of the tied
indices is right, as long as each index gives its value and none repeats.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import bounded, int_matrix

from disembed.mining import (
    MARGINS,
    MODES,
    KnnOptions,
    candidates,
    knn,
    knn_both,
    score_embeddings,
    search,
)

SETTINGS = bounded(120)
# zero rows make a ratio margin 0/0: NaN, as the reference computes it too
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:divide by zero:RuntimeWarning")
BACKENDS = ["exact", "exact-bf16"] + (
    ["faiss-flat"] if importlib.util.find_spec("faiss") else [])


@st.composite
def problem(draw, both: bool = False):
    n, m, d = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 5))
    x, y = draw(int_matrix(n, d)), draw(int_matrix(m, d))
    if draw(st.booleans()):  # duplicates: some rows of y copied from x
        take = draw(st.lists(st.integers(0, n - 1), max_size=m))
        y[: len(take)] = x[take]
    k = draw(st.integers(1, min(n, m) if both else m))
    options = KnnOptions(block_rows=draw(st.integers(1, 4)), block_cols=draw(st.integers(1, 4)))
    return x, y, k, options


def assert_top_k(D, I, q, db, k):  # noqa: E741
    """``D (nq, k)``, ``I (nq, k)`` are a correct top-k of ``q @ db.T``, ties allowed."""
    sims = q.astype(np.float64) @ db.astype(np.float64).T
    expected = -np.sort(-sims, axis=1)[:, :k]
    assert D.shape == I.shape == (len(q), k)
    np.testing.assert_allclose(D, expected, atol=1e-6)
    np.testing.assert_allclose(np.take_along_axis(sims, I, axis=1), D, atol=1e-6)
    assert all(len(set(row)) == k for row in I.tolist())


@SETTINGS
@given(problem())
def test_knn_is_a_top_k(case):
    x, y, k, options = case
    assert_top_k(*knn(x, y, k, options), x, y, k)


@SETTINGS
@given(problem(both=True))
def test_knn_both_is_a_top_k_each_way(case):
    x, y, k, options = case
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, k, options)
    assert_top_k(D_xy, I_xy, x, y, k)
    assert_top_k(D_yx, I_yx, y, x, k)


@pytest.mark.parametrize("backend", BACKENDS)
@bounded(60)
@given(case=problem())
def test_every_backend_is_a_top_k(backend, case):
    x, y, k, _ = case
    assert_top_k(*search(x, y, k, backend), x, y, k)


def _means(x, y, k):
    """Brute-force neighbour means: of each x row in y, and of each y row in x."""
    sims = x.astype(np.float64) @ y.astype(np.float64).T
    top = lambda s, kk: -np.sort(-s, axis=1)[:, :kk]  # noqa: E731
    return sims, top(sims, k).mean(axis=1), top(sims.T, k).mean(axis=1)


def _margin(cos, a, b, kind):
    denom = (a + b) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"ratio": cos / denom, "distance": cos - denom, "absolute": cos}[kind]


@SETTINGS
@given(problem(both=True), st.sampled_from(MARGINS))
def test_score_embeddings_is_the_margin_formula(case, kind):
    x, y, k, _ = case
    p = min(len(x), len(y))
    src, tgt = x[:p], y[:p]
    got = score_embeddings(src, tgt, kind if kind != "absolute" else "cosine", k=k,
                           src_pool=x, tgt_pool=y)
    cos = np.einsum("pd,pd->p", src.astype(np.float64), tgt.astype(np.float64))
    ref_a = (-np.sort(-(src.astype(np.float64) @ y.T.astype(np.float64)), axis=1))[:, :k]
    ref_b = (-np.sort(-(tgt.astype(np.float64) @ x.T.astype(np.float64)), axis=1))[:, :k]
    expected = _margin(cos, ref_a.mean(axis=1), ref_b.mean(axis=1), kind)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


@SETTINGS
@given(problem(both=True), st.sampled_from(MODES), st.sampled_from(MARGINS))
def test_candidates_are_scored_and_chosen_correctly(case, mode, kind):
    x, y, k, options = case
    score, src, tgt = candidates(*knn_both(x, y, k, options), mode=mode, kind=kind)
    sims, a, b = _means(x, y, k)
    assert len(score) == len(src) == len(tgt)
    np.testing.assert_allclose(score, _margin(sims[src, tgt], a[src], b[tgt], kind),
                               rtol=1e-5, atol=1e-6, equal_nan=True)
    ranked = score[~np.isnan(score)]
    assert (ranked[1:] <= ranked[:-1] + 1e-12).all()  # best first (inf and -inf included)
    assert len(set(zip(src.tolist(), tgt.tolist(), strict=True))) == len(src)  # unique pairs
    if mode != "backward":  # forward, intersection, max-score: one target per source
        assert len(set(src.tolist())) == len(src)
    if mode != "forward":  # backward, intersection, max-score: one source per target
        assert len(set(tgt.tolist())) == len(tgt)
    if mode == "forward":
        assert sorted(src.tolist()) == list(range(len(x)))
        kth = -np.sort(-sims, axis=1)[:, k - 1]
        assert (sims[src, tgt] >= kth[src] - 1e-9).all()  # a true k-nearest target
    if mode == "backward":
        assert sorted(tgt.tolist()) == list(range(len(y)))
