"""The two-level (seeds, items) bootstrap and the Holm correction, each against a computation
written out independently here."""

import itertools

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
    expected = [np.mean([spearmanr(x[strata == s, 0], gold[strata == s])[0] for s in "xy"])
                for x in a]
    assert t.per_seed_a == pytest.approx(expected)


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
    with pytest.raises(ShapeError, match="different items"):
        seed_bootstrap([A0, A1[:3]], [B0])


def test_holm_against_the_written_out_step_down():
    # m = 4 finite p-values; sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1, then running max
    adjusted = holm([0.01, 0.04, 0.03, float("nan"), 0.005])
    assert adjusted[[0, 1, 2, 4]] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert np.isnan(adjusted[3])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # 2 x 0.5 capped, then monotone
