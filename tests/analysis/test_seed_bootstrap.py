"""The two-level (seeds, items) bootstrap and the Holm correction, each against a computation
written out independently here."""

import itertools
from dataclasses import asdict

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from disembed.analysis.significance import holm, seed_bootstrap
from disembed.exceptions import ShapeError

A0 = np.array([0.9, 0.2, 0.6, 0.4])
A1 = np.array([0.5, 0.1, 0.8, 0.3])
B0 = np.array([0.4, 0.3, 0.5, 0.2])


def test_point_estimates_are_per_seed_scores_their_mean_and_the_ensemble_apart():
    rng = np.random.default_rng(3)
    gold = rng.normal(size=30)
    a = [np.stack([gold + rng.normal(scale=s, size=30), gold], 1) for s in (0.5, 1.0, 2.0)]
    b = [np.stack([gold + rng.normal(scale=1.0, size=30), gold], 1)]
    t = seed_bootstrap(a, b, statistic="pearson", n_resamples=50)
    per_seed = [pearsonr(x[:, 0], gold)[0] for x in a]
    assert t.per_seed_a == pytest.approx(per_seed)
    assert t.mean_a == pytest.approx(np.mean(per_seed))
    assert t.mean_b == pytest.approx(pearsonr(b[0][:, 0], gold)[0])
    assert t.delta == pytest.approx(np.mean(per_seed) - t.mean_b)
    ensemble = pearsonr(np.mean([x[:, 0] for x in a], axis=0), gold)[0]
    assert t.ensemble_a == pytest.approx(ensemble)
    assert t.ensemble_delta == pytest.approx(ensemble - t.mean_b)
    assert t.ensemble_a != pytest.approx(t.mean_a)  # the ensemble is a different number


def test_strata_average_the_per_stratum_statistic():
    rng = np.random.default_rng(4)
    gold = rng.normal(size=20)
    a = [np.stack([gold + rng.normal(size=20), gold], 1) for _ in range(2)]
    b = [np.stack([gold + rng.normal(size=20), gold], 1)]
    strata = np.array(["x"] * 8 + ["y"] * 12)
    t = seed_bootstrap(a, b, statistic="spearman", strata=strata, n_resamples=20)

    def stratified(x):
        return np.mean([spearmanr(x[strata == s, 0], gold[strata == s])[0] for s in "xy"])

    assert t.per_seed_a == pytest.approx([stratified(x) for x in a])
    assert t.per_seed_b == pytest.approx([stratified(b[0])])
    # the ensemble (per-item mean over seeds) is scored with the same strata
    assert t.ensemble_a == pytest.approx(stratified(np.mean(a, axis=0)))
    assert t.ensemble_b == pytest.approx(stratified(b[0]))
    assert t.ensemble_delta == pytest.approx(t.ensemble_a - t.ensemble_b)
    assert t.n_items == 20


def test_interval_matches_the_exact_two_level_enumeration():
    """Every seed draw (2 seeds of A with replacement: 4) times every item draw (4^4): the
    2.5/97.5 percentiles of that exact distribution are what the bootstrap estimates."""
    exact = []
    for picks in itertools.product(range(2), repeat=2):
        for items in itertools.product(range(4), repeat=4):
            idx = list(items)
            a_runs = (A0, A1)
            exact.append(np.mean([a_runs[p][idx].mean() for p in picks]) - B0[idx].mean())
    low, high = np.percentile(exact, [2.5, 97.5])
    t = seed_bootstrap([A0, A1], [B0], n_resamples=40000, seed=1)
    assert t.ci_low == pytest.approx(low, abs=0.02)
    assert t.ci_high == pytest.approx(high, abs=0.02)
    # the item-only interval of the same difference is narrower: seeds add variance
    items_only = [np.mean([A0[list(i)].mean(), A1[list(i)].mean()]) - B0[list(i)].mean()
                  for i in itertools.product(range(4), repeat=4)]
    assert np.ptp(np.percentile(items_only, [2.5, 97.5])) < high - low
    # two-sided p: twice the share of the exact distribution at or below 0 (delta > 0 here)
    assert t.delta > 0
    assert t.p_value == pytest.approx(2 * np.mean(np.array(exact) <= 0), abs=0.02)


def test_interval_widens_when_seeds_disagree():
    rng = np.random.default_rng(0)
    base = rng.random(200)
    ref = [base - 0.05 + rng.normal(scale=0.01, size=200)]
    agree = [base + rng.normal(scale=0.01, size=200) for _ in range(3)]
    disagree = [x + shift for x, shift in zip(agree, (-0.1, 0.0, 0.1), strict=True)]
    t_agree = seed_bootstrap(agree, ref, n_resamples=2000)
    t_disagree = seed_bootstrap(disagree, ref, n_resamples=2000)
    assert t_agree.delta == pytest.approx(t_disagree.delta)  # same mean over seeds
    assert t_agree.ensemble_delta == pytest.approx(t_disagree.ensemble_delta)
    width = lambda t: t.ci_high - t.ci_low  # noqa: E731
    assert width(t_disagree) > 3 * width(t_agree)
    assert t_agree.ci_low > 0 and t_disagree.ci_low < 0  # the seeds' spread hides the gain


def test_runs_on_different_items_are_refused():
    with pytest.raises(ShapeError, match="different items.*with the same task options$"):
        seed_bootstrap([A0, A1[:3]], [B0])


def test_holm_against_the_written_out_step_down():
    # m = 4 finite p-values; sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1, then running max
    adjusted = holm([0.01, 0.04, 0.03, float("nan"), 0.005])
    assert adjusted[[0, 1, 2, 4]] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert np.isnan(adjusted[3])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # 2 x 0.5 capped, then monotone


def test_each_side_needs_a_run():
    message = "^seed_bootstrap needs at least one run on each side$"
    for a, b in (([], [B0]), ([A0], [])):
        with pytest.raises(ShapeError, match=message):
            seed_bootstrap(a, b)


def test_defaults_are_2000_resamples_with_seed_0():
    got = seed_bootstrap([A0, A1], [B0])
    assert got.n_resamples == 2000 and 0.05 < got.p_value < 0.95
    np.testing.assert_equal(asdict(got),
                            asdict(seed_bootstrap([A0, A1], [B0], n_resamples=2000, seed=0)))


def test_p_value_is_twice_the_share_on_the_other_side_plus_one():
    """A beats B on every item in every seed, so no resample falls on the other side of 0,
    whichever side wins: p = 2 (0 + 1) / (R + 1), over exactly R = 300 resamples (not a
    multiple of the 256-resample block)."""
    better = [B0 + 1.0, B0 + 2.0]
    for a, b in ((better, [B0]), ([B0], better)):
        t = seed_bootstrap(a, b, n_resamples=300)
        assert t.n_resamples == 300 and t.n_items == 4
        assert t.p_value == pytest.approx(2 / 301, rel=1e-12)


def test_each_resample_draws_as_many_seeds_as_a_recipe_has():
    """One recipe's two seeds differ by exactly 1 on every item, the other recipe is its first
    seed. Drawing two seeds with replacement gives resampled deltas of 0, 0.5 and 1 (in
    size) with probabilities 1/4, 1/2, 1/4 whatever the items drawn, so p = 2 x 1/4 = 0.5.
    One seed drawn for a whole block of resamples would give p near 1."""
    x = np.array([0.3, 0.9, 0.1, 0.5])
    for a, b in (([x], [x, x + 1.0]), ([x + 1.0, x], [x + 1.0])):
        t = seed_bootstrap(a, b, n_resamples=20_000)
        assert t.delta == pytest.approx(-0.5)
        assert t.p_value == pytest.approx(0.5, abs=0.03)


def test_items_are_resampled_within_strata():
    """A beats B by 1 on every item of stratum x (3 items) and by -0.5 on every item of y
    (5 items): the stratified delta, (1 - 0.5) / 2, is the same in every resample that keeps
    each stratum's items inside it, so the interval is that single point."""
    x = np.array([0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8, 0.4])
    strata = np.array(["x"] * 3 + ["y"] * 5)
    a = x + np.where(strata == "x", 1.0, -0.5)
    t = seed_bootstrap([a], [x], strata=strata, n_resamples=500)
    assert t.delta == pytest.approx(0.25)
    assert (t.ci_low, t.ci_high) == pytest.approx((0.25, 0.25))


def test_interval_ends_are_the_2_5_and_97_5_percentiles():
    """Item differences (0, 2, 3, 3, 3): over all 5^5 equally likely item draws the resampled
    delta is <= 1.0 in 2.9% of them and next takes 1.2, so the 2.5th percentile is 1.0 (the
    3.5th would be 1.2)."""
    diff = np.array([0.0, 2.0, 3.0, 3.0, 3.0])
    exact = [diff[list(i)].mean() for i in itertools.product(range(5), repeat=5)]
    t = seed_bootstrap([diff + 1.0], [np.ones(5)], n_resamples=20_000)
    assert (t.ci_low, t.ci_high) == pytest.approx(tuple(np.percentile(exact, [2.5, 97.5])),
                                                  abs=0.05)


def test_tie_is_scored_as_a_win_of_a():
    """delta == 0 counts as delta > 0 does: p = 2 x the share of resamples with delta <= 0.
    For the item differences (-21, 1, 5, 7, 8) that share is 0.474 over all 5^5 draws
    (p = 0.948); the other side (delta >= 0) holds 0.564, which would give p = 1."""
    diff = np.array([-21.0, 1.0, 5.0, 7.0, 8.0])
    exact = np.array([diff[list(i)].mean() for i in itertools.product(range(5), repeat=5)])
    t = seed_bootstrap([diff + 30.0], [np.full(5, 30.0)], n_resamples=40_000)
    assert t.delta == 0
    assert t.p_value == pytest.approx(2 * np.mean(exact <= 0), abs=0.02)


def test_no_finite_resample_gives_no_p_value_or_interval():
    rng = np.random.default_rng(5)
    gold = rng.random(8)
    flat = np.stack([np.full(8, 0.5), gold], 1)  # constant system: every correlation is nan
    t = seed_bootstrap([flat], [np.stack([gold + rng.random(8), gold], 1)],
                       statistic="pearson", n_resamples=50)
    assert t.n_resamples == 0
    assert np.isnan([t.p_value, t.ci_low, t.ci_high]).all()


def test_holm_caps_at_one_and_gives_tied_p_values_equal_adjustments():
    assert holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])  # 2 x 0.6 = 1.2 is capped at 1
    # sorted 0.01, 0.01, 0.04 -> x3, x2, x1, then the running max
    assert holm([0.01, 0.04, 0.01]) == pytest.approx([0.03, 0.04, 0.03])


def test_holm_adjusts_in_float64_whatever_the_input_type():
    p32 = np.array([0.019, 0.031, 0.071], np.float32)  # 3 x 0.019 rounds in float32
    adjusted = holm(p32)
    assert adjusted.dtype == np.float64
    want = [3 * float(p32[0]), 2 * float(p32[1]), float(p32[2])]  # increasing: no running max
    assert adjusted.tolist() == pytest.approx(want, rel=1e-12)
