"""Margin scores and the four candidate modes against direct, loop-based definitions."""

import math

import numpy as np
import pytest

from disembed.exceptions import ConfigError, ShapeError
from disembed.mining import (
    brute_force_knn,
    candidates,
    margin,
    normalize_rows,
    pair_scores,
    select,
)


def lists(n=40, m=30, d=8, seed=0, k=3):
    rng = np.random.default_rng(seed)
    x, y = normalize_rows(rng.standard_normal((n, d))), normalize_rows(rng.standard_normal((m, d)))
    return x, y, (*brute_force_knn(x, y, k), *brute_force_knn(y, x, k))


def reference_score(x, y, i, j, k, kind):
    """The Artetxe & Schwenk margin written out for one pair."""
    cos = float(x[i] @ y[j])
    a = np.sort(y @ x[i])[-k:].sum() / (2 * k)
    b = np.sort(x @ y[j])[-k:].sum() / (2 * k)
    return {"ratio": cos / (a + b), "distance": cos - (a + b), "absolute": cos}[kind]


@pytest.mark.parametrize("kind", ["ratio", "distance", "absolute"])
def test_forward_candidates_follow_the_definition(kind):
    x, y, L = lists()
    score, src, tgt = candidates(*L, mode="forward", kind=kind)
    assert sorted(src.tolist()) == list(range(len(x)))
    for s, i, j in zip(score, src, tgt, strict=True):
        best = max(range(len(y)) if kind == "absolute" else L[1][i],
                   key=lambda jj: reference_score(x, y, i, jj, 3, kind))
        assert j == best
        assert s == pytest.approx(reference_score(x, y, i, j, 3, kind), rel=1e-5, abs=1e-6)
    assert (np.diff(score) <= 0).all()


def test_modes_relate_as_defined():
    _, _, L = lists(seed=1)
    fwd = set(zip(*candidates(*L, mode="forward")[1:], strict=True))
    bwd = set(zip(*candidates(*L, mode="backward")[1:], strict=True))
    inter = set(zip(*candidates(*L, mode="intersection")[1:], strict=True))
    assert inter == fwd & bwd and inter
    _, src, tgt = candidates(*L, mode="max-score")
    assert set(zip(src, tgt, strict=True)) <= fwd | bwd
    assert len(set(src.tolist())) == len(src) and len(set(tgt.tolist())) == len(tgt)
    assert inter <= set(zip(src, tgt, strict=True))  # a mutual best pair is never blocked


def test_defaults_are_max_score_and_ratio():
    _, _, L = lists(seed=2)
    for got, want in zip(candidates(*L), candidates(*L, mode="max-score", kind="ratio"),
                         strict=True):
        np.testing.assert_array_equal(got, want)
    cos, mx, my = np.array([0.5, -0.2]), np.array([0.4, 0.6]), np.array([0.2, 0.1])
    np.testing.assert_allclose(margin(cos, mx, my), cos / ((mx + my) / 2), rtol=1e-15)


@pytest.mark.parametrize("kind", ["ratio", "distance", "absolute"])
def test_pair_scores_follow_the_definition(kind):
    """Given aligned pairs (i, i), each side's k-NN similarities in the other pool."""
    x, y, _ = lists(n=25, m=25, seed=3, k=4)
    cos = np.einsum("id,id->i", x, y)
    got = pair_scores(cos, brute_force_knn(x, y, 4)[0], brute_force_knn(y, x, 4)[0], kind)
    want = [reference_score(x, y, i, i, 4, kind) for i in range(len(x))]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    if kind == "ratio":  # the default
        np.testing.assert_array_equal(
            pair_scores(cos, brute_force_knn(x, y, 4)[0], brute_force_knn(y, x, 4)[0]), got)


def test_neighbour_means_are_summed_in_float64():
    """float32 lists (as faiss returns them) whose similarities cancel: a float32 running
    sum of [1, 1e-7, -1] loses the 1e-7 to rounding (1 + 1e-7 == 1.00000012 in float32)."""
    D = np.array([[1.0, 1e-7, -1.0], [0.9, 0.5, 0.1]], dtype=np.float32)
    exact = np.array([math.fsum(row) / 3 for row in D.astype(np.float64)])
    cos = np.array([0.3, 0.8])
    for kind, want in [("distance", cos - exact), ("ratio", cos / exact)]:
        np.testing.assert_allclose(pair_scores(cos, D, D, kind), want, rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.longdouble, np.int64])
@pytest.mark.parametrize("kind", ["ratio", "distance", "absolute"])
def test_margin_scores_are_float64_whatever_comes_in(dtype, kind):
    """The scores are float64 (as ``candidates`` documents), whether the inputs are less
    precise (float16/32, integers) or more (longdouble); values as computed in float64."""
    cos, mx, my = (np.array(v).astype(dtype) for v in ([1, 0, -1], [2, 1, 3], [4, 1, 1]))
    got = margin(cos, mx, my, kind)
    c, d = cos.astype(np.float64), (mx.astype(np.float64) + my.astype(np.float64)) / 2
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, {"ratio": c / d, "distance": c - d, "absolute": c}[kind])


@pytest.mark.parametrize("kind", ["ratio", "distance", "absolute"])
def test_candidate_scores_are_float64_and_indices_int64(kind):
    _, _, L = lists(seed=4)
    assert L[0].dtype == np.float32  # as brute_force_knn and faiss return them
    L = (L[0], L[1].astype(np.int32), L[2], L[3].astype(np.int32))
    for mode in ["forward", "backward", "intersection", "max-score"]:
        score, src, tgt = candidates(*L, mode=mode, kind=kind)
        assert (score.dtype, src.dtype, tgt.dtype) == (np.float64, np.int64, np.int64)


def test_select_threshold_and_top():
    score = np.array([3.0, 2.0, 1.5, 1.0])
    assert select(score, threshold=1.5).tolist() == [True, True, True, False]
    assert select(score, top=1).tolist() == [True, False, False, False]
    assert select(score, threshold=1.8, top=3).sum() == 2
    assert select(score, top=0).tolist() == [False] * 4  # top=0 is allowed and keeps none
    with pytest.raises(ConfigError, match=r"top must be >= 0, got -1"):
        select(score, top=-1)


def test_margin_errors():
    with pytest.raises(ConfigError, match="margin must be one of"):
        margin(np.ones(2), np.ones(2), np.ones(2), "cosine")
    _, _, L = lists()
    with pytest.raises(ConfigError, match="mode must be one of"):
        candidates(*L, mode="both")
    with pytest.raises(ConfigError, match=r"^margin must be one of .*, got 'cosine'"):
        candidates(*L, kind="cosine")


@pytest.mark.parametrize("side", [0, 2])
def test_lists_of_different_shapes_are_rejected(side):
    """Either direction alone with distances and indices of different shapes."""
    L = list(lists(k=3)[2])
    L[side] = L[side][:, :2]
    with pytest.raises(ShapeError, match=r"differ in shape: .*\(\d+, 2\)"):
        candidates(*L)


@pytest.mark.parametrize("side", [0, 2])
def test_lists_that_are_not_2d_are_rejected(side):
    L = list(lists(k=3)[2])
    L[side], L[side + 1] = L[side][:, 0], L[side + 1][:, 0]
    n = len(L[side])
    with pytest.raises(ShapeError, match=rf"must be 2-d \(n, k\), got .*\({n},\)"):
        candidates(*L)
