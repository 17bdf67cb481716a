"""The exact search's memory is bounded by its block, however many lists tie (issue 48).

Duplicated rows tie every list: no candidate passes a certificate and every entry passes
the column lists' screen. Two buffers then grew with the input instead of the block: the
column lists' entries of a row block against the whole chunk (``rows x 1M``: BUCC's
language parts, where every sentence of a language has nearly the same vector, went past
20 GB), and the float64 fallback, ``(uncertified lists x 65,536)`` float64 at once. The
numbers are counted, not timed: torch's entries per merge, numpy's peak by tracemalloc."""

import importlib
import tracemalloc

import numpy as np
import pytest

from disembed.retrieval import KnnOptions, brute_force_knn, knn, knn_both
from disembed.retrieval.topk import TopKLists

knn_module = importlib.import_module("disembed.retrieval.knn")  # the package shadows it

BLOCK = 32
OPTIONS = dict(block_rows=BLOCK, block_cols=BLOCK, group=4)


def pools(kind, n, m, d=8, seed=0):
    """``identical``: every row the same; ``near``: one vector plus noise far below float32
    resolution of the products (a language part: each row the language's mean, mixed by
    an identifier's weights); ``boilerplate``: distinct rows, 10% one repeated row."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(d)
    if kind == "boilerplate":
        x, y = rng.standard_normal((n, d)), rng.standard_normal((m, d))
        x[rng.random(n) < 0.1] = base
        y[rng.random(m) < 0.1] = base
    else:
        scale = 0.0 if kind == "identical" else 1e-9
        x = base + scale * rng.standard_normal((n, d))
        y = base + scale * rng.standard_normal((m, d))
    return knn_module.normalize_rows(x), knn_module.normalize_rows(y)


def reference(q, db, k):
    """The contract: float64 products rounded to float32, ranked, equal ones by lower
    index (brute_force_knn ranks before rounding: near-ties then differ)."""
    sims = (np.asarray(q, np.float64) @ np.asarray(db, np.float64).T).astype(np.float32)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, 1), order


@pytest.fixture
def merged(monkeypatch):
    """The most entries any one merge into the running lists received."""
    sizes = []
    merge = TopKLists.merge_sparse

    def counting(self, rows, idx, vals):
        sizes.append(rows.numel())
        return merge(self, rows, idx, vals)

    monkeypatch.setattr(TopKLists, "merge_sparse", counting)
    return sizes


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", ["identical", "near", "boilerplate"])
def test_ties_are_exact_in_memory_bounded_by_the_block(kind, precision, merged):
    n, m, k = 900, 1200, 4
    x, y = pools(kind, n, m)
    opt = KnnOptions(precision=precision, **OPTIONS)
    tracemalloc.start()
    try:
        D_xy, I_xy, D_yx, I_yx = knn_both(x, y, k, opt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # torch: a merge takes at most two blocks' entries (was: a row block x every column)
    assert max(merged) <= 2 * BLOCK * BLOCK
    # numpy: the lists and a few copies of the input rows, plus the block (was: 66 MB,
    # the float64 fallback's (lists x database) at once)
    rows = (n + m) * (opt.widened(k, precision) + x.shape[1]) * 8
    assert peak < 4 * rows + 64 * BLOCK * BLOCK * 8, peak
    for got, want in (((D_xy, I_xy), reference(x, y, k)), ((D_yx, I_yx), reference(y, x, k))):
        np.testing.assert_array_equal(got[1], want[1])  # ties: lower index first
        np.testing.assert_array_equal(got[0], want[0])


def test_the_float64_fallback_holds_a_bounded_group_of_lists():
    """float64_knn of 3,000 tied lists holds ``cells`` products at a time, not 3,000 x the
    database block; its answer is brute force's, ties by lower index."""
    x, y = pools("identical", 3000, 2000)
    tracemalloc.start()
    try:
        D, I = knn_module.float64_knn(x, y, 5, block=256, cells=256 * 16)  # noqa: E741
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3000 * 5 * 12 * 3 + 64 * 256 * 16 * 8, peak  # lists, then the block
    want_D, want_I = brute_force_knn(x, y, 5)
    np.testing.assert_array_equal(I, want_I)
    np.testing.assert_array_equal(D, want_D)


@pytest.mark.parametrize("seed", range(6))
def test_float64_knn_ranks_ties_as_brute_force_whatever_its_blocks(seed):
    rng = np.random.default_rng(seed)
    n, m, d = (int(v) for v in rng.integers(1, 60, 3))
    x = rng.integers(-2, 3, (n, d % 5 + 1)).astype(np.float32)
    y = rng.integers(-2, 3, (m, d % 5 + 1)).astype(np.float32)
    for k in sorted({1, max(1, m // 2), m}):
        for block, cells in ((1, 1), (7, 20), (64, 4096)):
            D, I = knn_module.float64_knn(x, y, k, block=block, cells=cells)  # noqa: E741
            want_D, want_I = brute_force_knn(x, y, k)
            np.testing.assert_array_equal(I, want_I)
            np.testing.assert_array_equal(D, want_D)


def test_one_query_against_ties_keeps_the_lowest_rows():
    y = np.ones((5000, 4), np.float32) / 2
    D, I = knn(y[:1], y, 7, KnnOptions(**OPTIONS))  # noqa: E741
    assert I.tolist() == [list(range(7))] and D.tolist() == [[1.0] * 7]
