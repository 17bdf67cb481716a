"""Margin scores and the four candidate modes against direct, loop-based definitions."""

import numpy as np
import pytest

from disembed.exceptions import ConfigError
from disembed.mining import brute_force_knn, candidates, margin, normalize_rows, select


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


def test_select_threshold_and_top():
    score = np.array([3.0, 2.0, 1.5, 1.0])
    assert select(score, threshold=1.5).tolist() == [True, True, True, False]
    assert select(score, top=1).tolist() == [True, False, False, False]
    assert select(score, threshold=1.8, top=3).sum() == 2


def test_margin_errors():
    with pytest.raises(ConfigError, match="margin must be one of"):
        margin(np.ones(2), np.ones(2), np.ones(2), "cosine")
    _, _, L = lists()
    with pytest.raises(ConfigError, match="mode must be one of"):
        candidates(*L, mode="both")
