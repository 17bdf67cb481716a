"""Exact ties: the exact search keeps the lower index, in both precisions and directions,
whatever the blocks, chunks, screen groups and number of workers (issue 36)."""

import importlib

import numpy as np
import pytest

from disembed.retrieval import KnnOptions, brute_force_knn, knn, knn_both

knn_module = importlib.import_module("disembed.retrieval.knn")  # the package shadows it


class _Threads:
    def __init__(self, n):
        self.threads = n


@pytest.fixture(params=[1, 3], ids=["1 worker", "3 workers"])
def workers(request, monkeypatch):
    monkeypatch.setattr(knn_module, "configure_threads", lambda *a, **kw: _Threads(request.param))
    return request.param


def tied(seed, n, m, d=6):
    """Small integers (every product and sum exact in bfloat16 and float32, so ties are
    exact in both), with some rows repeated: many lists tie at their k-th place."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, (n, d)).astype(np.float32)
    y = rng.integers(-2, 3, (m, d)).astype(np.float32)
    y[rng.integers(0, m, m // 3)] = y[rng.integers(0, m, m // 3)]  # duplicated rows
    return x, y


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
@pytest.mark.parametrize("sizes", [dict(block_rows=7, block_cols=9, group=2, chunk_rows=20),
                                   dict(block_rows=16, block_cols=32, group=16),
                                   dict(block_rows=5, block_cols=64, group=4, chunk_rows=33)])
def test_ties_go_to_the_lower_index_both_ways(precision, sizes, workers):
    x, y = tied(sizes["block_rows"], 61, 83)
    k = 5
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, k, KnnOptions(precision=precision, **sizes))
    want_D, want_I = brute_force_knn(x, y, k)  # stable sort: lower index first
    np.testing.assert_array_equal(I_xy, want_I)
    np.testing.assert_array_equal(D_xy, want_D)
    want_D, want_I = brute_force_knn(y, x, k)
    np.testing.assert_array_equal(I_yx, want_I)
    np.testing.assert_array_equal(D_yx, want_D)


def test_a_tie_at_the_kth_place_keeps_the_lowest_of_the_tied_rows(workers):
    """Six database rows tie for places 2..7 of a list of k = 3; the two kept are the two
    lowest indices among them, wherever they sit in the blocks."""
    q = np.array([[1.0, 0.0]], np.float32)
    y = np.zeros((40, 2), np.float32)
    y[:, 1] = 1.0  # score 0
    y[31] = [2.0, 0.0]  # the best
    tied_rows = [3, 17, 22, 8, 35, 12]  # score 1
    y[tied_rows] = [1.0, 5.0]
    for precision in ("float32", "bfloat16"):
        for cols in (4, 7, 40):
            D, I = knn(q, y, 3, KnnOptions(precision=precision, block_cols=cols, group=2))  # noqa: E741
            assert I.tolist() == [[31, 3, 8]], (precision, cols)
            assert D.tolist() == [[2.0, 1.0, 1.0]]


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_near_ties_below_float32_resolution_follow_the_float64_reference(precision, workers):
    """Database rows that differ by a few float32 ulps (near-duplicates, as in real
    corpora): blocked float32 products order them by rounding noise, which differs between
    kernels and block shapes. Both precisions re-score their candidates in float64 and
    certify them, so both return the float64 answer rounded to float32 (equal ones: lower
    index), the same index sets whatever the blocks."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((40, 48)).astype(np.float32)
    base = rng.standard_normal((60, 48)).astype(np.float32)
    y = np.concatenate([base + 3e-7 * rng.standard_normal((60, 48)).astype(np.float32)
                        for _ in range(4)])  # four near-copies of each row
    want_D, want_I = knn_module.float64_knn(x, y, 6)
    for sizes in (dict(block_rows=8, block_cols=16, group=4), dict(block_rows=40, block_cols=240)):
        D, I = knn(x, y, 6, KnnOptions(precision=precision, **sizes))  # noqa: E741
        np.testing.assert_array_equal(I, want_I)
        np.testing.assert_array_equal(D, want_D)
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, 6, KnnOptions(precision=precision))
    np.testing.assert_array_equal(I_xy, want_I)
    np.testing.assert_array_equal(I_yx, knn_module.float64_knn(y, x, 6)[1])
