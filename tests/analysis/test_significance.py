"""Paired bootstrap and permutation tests against brute force and scipy, on tiny data."""

import itertools

import numpy as np
import pytest
from scipy import stats

from disembed.analysis.significance import (
    batched_statistic,
    compare_all,
    compare_scores,
    paired_bootstrap,
    paired_permutation,
    score,
)
from disembed.evaluation import TASKS
from disembed.exceptions import ConfigError, ShapeError

A = np.array([0.9, 0.4, 0.7, 1.0, 0.3, 0.8])
B = np.array([0.5, 0.5, 0.2, 0.6, 0.4, 0.1])


def test_exact_permutation_matches_brute_force_and_scipy():
    res = paired_permutation(A, B, n_resamples=10_000)
    assert res.exact and res.n_resamples == 2 ** len(A)
    d = A - B
    flips = [np.mean(np.array(s) * d) for s in itertools.product([1, -1], repeat=len(d))]
    brute = np.mean(np.abs(flips) >= abs(d.mean()) - 1e-12)
    assert res.p_value == pytest.approx(brute)
    ref = stats.permutation_test((A, B), lambda x, y: np.mean(x) - np.mean(y),
                                 permutation_type="samples", n_resamples=np.inf)
    assert res.p_value == pytest.approx(ref.pvalue)


def test_monte_carlo_permutation_is_close_to_exact():
    rng = np.random.default_rng(1)
    a, b = rng.random(14), rng.random(14)
    exact = paired_permutation(a, b, n_resamples=2 ** 14).p_value
    approx = paired_permutation(a, b, n_resamples=4000, seed=3)
    assert not approx.exact
    assert approx.p_value == pytest.approx(exact, abs=0.03)


def test_bootstrap_matches_full_enumeration():
    a, b = A[:5], B[:5]
    n = len(a)
    deltas = np.array([a[list(i)].mean() - b[list(i)].mean()
                       for i in itertools.product(range(n), repeat=n)])
    brute = np.mean(deltas <= 0)  # observed delta > 0: share where A does not win
    res = paired_bootstrap(a, b, n_resamples=20_000, seed=0)
    assert res.delta > 0
    assert res.p_value == pytest.approx(brute, abs=0.015)
    # the interval is the 2.5/97.5 percentiles of the resampled deltas: against the exact
    # distribution over all n**n resamples (equally likely), within Monte Carlo error
    low, high = np.percentile(deltas, [2.5, 97.5])
    assert res.ci_low == pytest.approx(low, abs=0.02)
    assert res.ci_high == pytest.approx(high, abs=0.02)
    assert res.ci_high - res.ci_low < 0.6  # a wide fixed band (delta +- 10) fails here


def test_identical_systems_are_never_significant_and_big_gaps_are():
    rng = np.random.default_rng(0)
    a = rng.random(200)
    assert paired_permutation(a, a).p_value == pytest.approx(1.0)
    assert paired_bootstrap(a, a).p_value == pytest.approx(1.0)
    better = np.clip(a + 0.3, 0, 1)
    assert paired_permutation(better, a).p_value < 0.01
    assert paired_bootstrap(better, a).p_value < 0.01


def test_correlation_statistics_and_strata():
    rng = np.random.default_rng(2)
    gold = rng.random(30)
    sys_a = np.stack([gold + 0.1 * rng.standard_normal(30), gold], axis=1)
    assert score(sys_a, "spearman") == pytest.approx(stats.spearmanr(sys_a[:, 0], gold)[0])
    assert score(sys_a, "pearson") == pytest.approx(stats.pearsonr(sys_a[:, 0], gold)[0])
    strata = np.repeat([0, 1, 2], 10)
    per = [stats.spearmanr(sys_a[strata == s, 0], gold[strata == s])[0] for s in range(3)]
    assert score(sys_a, "spearman", strata) == pytest.approx(np.mean(per))
    batch = np.stack([sys_a, sys_a[::-1]])  # (2, 30, 2)
    assert batched_statistic(batch, "spearman")[0] == pytest.approx(score(sys_a, "spearman"))
    with pytest.raises(ShapeError):
        batched_statistic(batch[:, :, :1], "pearson")
    with pytest.raises(ConfigError):
        batched_statistic(batch, "kendall")


def _scores(tiny_data_dir, scale):
    def embed(texts):
        rng = np.random.default_rng(abs(hash(tuple(texts))) % 2 ** 32)
        return rng.standard_normal((len(texts), 8))

    def views(e, lang):
        return {"meaning": e * scale, "language": np.ones_like(e)}

    task = TASKS.get("tatoeba")(languages=["de", "zh"], data_dir=tiny_data_dir)
    return task.evaluate(embed, views)


def test_compare_scores_on_task_scores(tiny_data_dir):
    a, b = _scores(tiny_data_dir, 1.0), _scores(tiny_data_dir, 2.0)
    c = compare_scores(a, b, labels=("x", "y"), n_resamples=200)
    assert c.task == "tatoeba" and c.bootstrap.delta == pytest.approx(0.0)  # cosine is scale-free
    assert c.winner == "tie"
    assert c.bootstrap.n_items == sum(a.data_sizes.values())
    everything = compare_all({"x": [a], "y": [b]}, n_resamples=50)
    assert {(k.view, k.a, k.b) for k in everything} == {("meaning", "x", "y"),
                                                         ("language", "x", "y")}
    saved = type(a).from_dict(a.to_dict())  # per-item data are not serialised
    with pytest.raises(ConfigError, match="per-item"):
        compare_scores(saved, b)


def test_items_round_trip(tiny_data_dir, tmp_path):
    from disembed.analysis.items import attach_items, save_items

    a, b = _scores(tiny_data_dir, 1.0), _scores(tiny_data_dir, 1.0)
    save_items([a], tmp_path / "items.npz")
    loaded = attach_items([type(a).from_dict(a.to_dict())], tmp_path / "items.npz")[0]
    assert set(loaded.per_item) == set(a.per_item)
    c = compare_scores(loaded, b, n_resamples=20)
    assert c.bootstrap.delta == pytest.approx(0.0)


def test_permutation_of_correlations_ignores_the_scale_of_the_scores():
    rng = np.random.default_rng(4)
    gold = rng.random(120)
    good = gold + 0.2 * rng.standard_normal(120)
    worse = gold + 0.6 * rng.standard_normal(120)
    a, b = np.stack([good, gold], 1), np.stack([worse, gold], 1)
    shifted = np.stack([0.05 * worse + 10, gold], 1)  # same ranks, other scale
    for stat in ("spearman", "pearson"):
        p_plain = paired_permutation(a, b, statistic=stat, n_resamples=1000).p_value
        p_shift = paired_permutation(a, shifted, statistic=stat, n_resamples=1000).p_value
        assert p_plain < 0.01 and p_shift == pytest.approx(p_plain, abs=0.01)


def _seed_scores(items_by_subset):
    from disembed.evaluation.task_scores import ScoreRow, TaskScores

    rows = [ScoreRow("meaning", s, "credit", float(np.mean(v)), len(v))
            for s, v in items_by_subset.items()]
    return TaskScores("toy", "credit", "avg:all", rows=rows, per_item={
        ("meaning", s, "credit"): np.asarray(v, float) for s, v in items_by_subset.items()})


def test_compare_averaged_uses_every_seed_of_both_methods():
    """The seed-averaged comparison equals a computation written out here: per-item means
    over the seeds, then the stratified paired bootstrap. A version that keeps only the
    first seed (or drops one method's seeds) gives another delta and fails."""
    from disembed.analysis.significance import compare_averaged

    rng = np.random.default_rng(7)
    sizes = {"de": 30, "zh": 20}
    a = [_seed_scores({s: rng.random(n) + 0.1 * k for s, n in sizes.items()}) for k in range(3)]
    b = [_seed_scores({s: rng.random(n) for s, n in sizes.items()}) for _ in range(3)]
    got = compare_averaged(a, b, n_resamples=500, seed=1)

    def averaged(runs, subset):
        return np.mean([r.per_item[("meaning", subset, "credit")] for r in runs], axis=0)

    # the main score of an unregistered task averages its subsets with equal weight
    want_a = np.mean([averaged(a, s).mean() for s in sizes])
    want_b = np.mean([averaged(b, s).mean() for s in sizes])
    assert got.score_a == pytest.approx(want_a) and got.score_b == pytest.approx(want_b)
    assert got.delta == pytest.approx(want_a - want_b)
    first_only = np.mean([a[0].per_item[("meaning", s, "credit")].mean() for s in sizes])
    assert abs(first_only - want_a) > 0.05  # the seeds differ: a first-seed mutant is caught
    items_a = np.concatenate([averaged(a, s) for s in sizes])
    items_b = np.concatenate([averaged(b, s) for s in sizes])
    strata = np.array([s for s, n in sizes.items() for _ in range(n)], dtype=object)
    ref = paired_bootstrap(items_a, items_b, strata=strata, n_resamples=500, seed=1)
    assert (got.ci_low, got.ci_high) == pytest.approx((ref.ci_low, ref.ci_high))


def test_permutation_of_an_undefined_score_has_no_p_value():
    """A constant system (or gold) column makes that side's correlation nan, so delta is
    nan: there is nothing to test. It used to come out as p = 0 (every swap 'less extreme'
    than nan), or a ZeroDivisionError in exact mode when no swap had a finite delta."""
    rng = np.random.default_rng(0)
    gold = rng.random(8)
    b = np.stack([gold + 0.1 * rng.standard_normal(8), gold], 1)
    flat_system = np.stack([np.full(8, 0.5), gold], 1)
    flat_gold = np.stack([b[:, 0], np.ones(8)], 1)
    for a, b_ in ((flat_system, b), (b, flat_system), (flat_gold, flat_gold[::-1])):
        for stat in ("pearson", "spearman"):
            for n_resamples in (256, 100):  # exact, Monte Carlo
                res = paired_permutation(a, b_, statistic=stat, n_resamples=n_resamples)
                assert np.isnan(res.delta) and np.isnan(res.p_value)
                assert res.n_resamples == 0 and res.n_items == 8
