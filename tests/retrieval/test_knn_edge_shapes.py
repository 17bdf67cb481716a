"""The exact k-NN at the edges of its shapes (issue 36): one row, k equal to or above the
rows, databases smaller than the candidate window, and unit rows of mining size whose
neighbours differ below bfloat16 resolution. Both precisions return the same top-k
index sets, in the same order, as the float32 reference."""

import importlib

import numpy as np
import pytest

from disembed.exceptions import ConfigError
from disembed.retrieval import KnnOptions, knn, knn_both, normalize_rows

knn_module = importlib.import_module("disembed.retrieval.knn")  # the package shadows it
PRECISIONS = ["float32", "bfloat16"]


def both_ways_reference(x, y, k):
    """float64 products rounded to float32, equal scores to the lower index."""
    return (*knn_module.float64_knn(x, y, k), *knn_module.float64_knn(y, x, k))


def assert_same_lists(got, want):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("n,m", [(1, 1), (1, 9), (9, 1)])
def test_one_row_on_either_side(precision, n, m):
    rng = np.random.default_rng(n * 10 + m)
    x = rng.standard_normal((n, 16)).astype(np.float32)
    y = rng.standard_normal((m, 16)).astype(np.float32)
    got = knn_both(x, y, 1, KnnOptions(precision=precision))
    assert_same_lists(got, both_ways_reference(x, y, 1))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_k_equal_to_the_rows_returns_every_row_in_order(precision):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    y = rng.standard_normal((5, 12)).astype(np.float32)
    got = knn_both(x, y, 5, KnnOptions(precision=precision, block_rows=2, block_cols=3))
    assert_same_lists(got, both_ways_reference(x, y, 5))
    assert (np.sort(got[1], axis=1) == np.arange(5)).all()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_k_above_the_rows_is_refused_with_the_size_named(precision):
    x = np.ones((4, 8), np.float32)
    y = np.ones((3, 8), np.float32)
    with pytest.raises(ConfigError, match="database size 3, got 4"):
        knn(x, y, 4, KnnOptions(precision=precision))
    with pytest.raises(ConfigError, match="size 3"):  # the other direction's database: x
        knn_both(y, x, 4, KnnOptions(precision=precision))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("m", [5, 6, 11, 12])
def test_databases_smaller_than_the_candidate_window(precision, m):
    """k + 8 (bfloat16) or k + 4 (float32) candidates a list, capped at the rows."""
    rng = np.random.default_rng(m)
    x = rng.integers(-2, 3, (30, 6)).astype(np.float32)  # many exact ties
    y = rng.integers(-2, 3, (m, 6)).astype(np.float32)
    got = knn_both(x, y, 4, KnnOptions(precision=precision, block_rows=7, block_cols=4))
    assert_same_lists(got, both_ways_reference(x, y, 4))


def near_copies(rng, n, d, scale):
    base = rng.standard_normal((n, d)).astype(np.float32)
    rows = [base] + [base + scale * rng.standard_normal((n, d)).astype(np.float32)
                     for _ in range(3)]
    rows.append(base[: n // 4])  # exact duplicates
    return normalize_rows(np.concatenate(rows))


def test_unit_rows_apart_below_bfloat16_resolution_give_identical_lists():
    """384-d unit rows whose neighbours differ by ~1e-3 in similarity (below a bfloat16
    product's error bound there) and exact duplicates: every list a near-tie. The default
    path's answer must not depend on the precision: the same index sets, in the same
    order, as float32 and as the float64 reference."""
    rng = np.random.default_rng(36)
    x = near_copies(rng, 48, 384, 2e-3)
    y = near_copies(rng, 60, 384, 2e-3)
    want = both_ways_reference(x, y, 4)
    opts = dict(block_rows=32, block_cols=64, group=4)
    bf16 = knn_both(x, y, 4, KnnOptions(precision="bfloat16", **opts))
    fp32 = knn_both(x, y, 4, KnnOptions(precision="float32", **opts))
    assert_same_lists(bf16, want)
    assert_same_lists(fp32, want)
