"""Paired bootstrap and permutation tests against brute force and scipy, on tiny data."""

import itertools
import json
from dataclasses import asdict

import numpy as np
import pytest
from scipy import stats

from disembed.analysis.significance import (
    Comparison,
    PairedTest,
    _swap_masks,
    batched_statistic,
    compare_all,
    compare_averaged,
    compare_scores,
    compare_seeds,
    paired_bootstrap,
    paired_permutation,
    score,
    seed_bootstrap,
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
    assert paired_permutation(a, b, n_resamples=4000, seed=3).p_value == approx.p_value


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
                assert np.isnan([res.delta, res.p_value, res.ci_low, res.ci_high]).all()
                assert res.n_resamples == 0 and res.n_items == 8
                np.testing.assert_equal((res.score_a, res.score_b),
                                        (score(a, stat), score(b_, stat)))


def test_bootstrap_without_a_finite_resample_has_no_interval():
    rng = np.random.default_rng(0)
    gold = rng.random(8)
    a = np.stack([np.full(8, 0.5), gold], 1)  # constant system: every resample is nan
    b = np.stack([gold + 0.1 * rng.standard_normal(8), gold], 1)
    res = paired_bootstrap(a, b, statistic="pearson", n_resamples=100)
    assert res.n_resamples == 0 and np.isnan(res.ci_low) and np.isnan(res.ci_high)
    assert np.isnan(res.p_value)  # not 1.0: nothing was measured (as seed_bootstrap says)


def test_defaults_are_2000_resamples_with_seed_0():
    rng = np.random.default_rng(5)
    a, b = rng.random(30), rng.random(30)  # Monte Carlo for both tests, p far from 0 and 1
    for test in (paired_bootstrap, paired_permutation):
        got = test(a, b)
        assert got.n_resamples == 2000 and 0.05 < got.p_value < 0.95
        np.testing.assert_equal(asdict(got), asdict(test(a, b, n_resamples=2000, seed=0)))


def test_bootstrap_p_value_is_the_share_not_won_plus_one_over_resamples_plus_one():
    """a beats b on every item, so no resample is lost by the observed winner, whichever
    side it is: p = (0 + 1) / (R + 1) exactly."""
    rng = np.random.default_rng(6)
    better, worse = rng.random(20) + 1.0, rng.random(20)
    for a, b in ((better, worse), (worse, better)):
        res = paired_bootstrap(a, b, n_resamples=300)
        assert res.n_resamples == 300
        assert res.p_value == pytest.approx(1 / 301, rel=1e-12)


def test_bootstrap_tie_is_scored_as_a_win_of_a():
    """delta == 0 (a tie, common with 0/1 retrieval credit) is scored as delta > 0 is: p is
    the share of resamples where a is not ahead (resampled delta <= 0). For the skewed item
    differences (3, -1, -1, -1) that is 0.738 over all 4^4 equally likely resamples; the
    other side (resampled delta >= 0) would give 0.684."""
    a, b = np.array([4.0, 0.0, 0.0, 0.0]), np.ones(4)
    deltas = np.array([a[list(i)].mean() - 1 for i in itertools.product(range(4), repeat=4)])
    res = paired_bootstrap(a, b, n_resamples=20_000)
    assert res.delta == 0
    assert res.p_value == pytest.approx(np.mean(deltas <= 0), abs=0.015)


def test_permutation_is_exact_when_all_2_to_the_n_swaps_fit():
    exact = paired_permutation(A, B, n_resamples=2 ** len(A))
    assert exact.exact and exact.n_resamples == 64
    sampled = paired_permutation(A, B, n_resamples=63)
    assert not sampled.exact and sampled.n_resamples == 63


def test_exact_enumeration_stops_at_20_items():
    """All 2^n swap masks are built in memory, so enumeration stops at n = 20 (a million
    masks): 21 items are sampled even when n_resamples would cover all 2^21 swaps."""
    class Draws:  # stands in for the generator: records the Monte Carlo draw
        def random(self, shape):
            self.shape = shape
            return np.zeros((1, shape[1]))

    draws = Draws()
    assert not _swap_masks(21, 2 ** 21, draws)[1] and draws.shape == (2 ** 21, 21)


def test_exact_permutation_with_strata_against_brute_force():
    """Stratified: the score is the unweighted mean of the per-stratum means, and the exact
    test flips the sign of each item's difference in every one of the 2^10 ways (four
    blocks of 256 swaps)."""
    rng = np.random.default_rng(8)
    a, b = rng.random((10, 2)), rng.random((10, 2))
    strata = np.array(["x"] * 3 + ["y"] * 7)

    def stratified(values):
        return np.mean([values[strata == s].mean() for s in "xy"])

    res = paired_permutation(a, b, strata=strata, n_resamples=1024)
    assert (res.score_a, res.score_b) == pytest.approx((stratified(a), stratified(b)))
    diff = (a - b).mean(axis=1)
    assert res.delta == pytest.approx(stratified(diff))
    flips = [stratified(np.array(s) * diff) for s in itertools.product([1, -1], repeat=10)]
    brute = np.mean(np.abs(flips) >= abs(stratified(diff)) - 1e-12)
    assert 0.05 < brute < 0.95
    assert res.exact and res.n_resamples == 1024 and res.n_items == 10
    assert res.p_value == pytest.approx(brute)
    assert np.isnan(res.ci_low) and np.isnan(res.ci_high)  # no interval from this test


def test_monte_carlo_permutation_p_value_adds_one():
    """Monte Carlo: p = (swaps at least as extreme + 1) / (swaps + 1). a beats b by the same
    margin on all 30 items, so only 'swap none' and 'swap all' reach |delta|, and 500
    random masks of 2^30 miss both: p = 1 / 501."""
    rng = np.random.default_rng(9)
    b = rng.random(30)
    res = paired_permutation(b + 0.25, b, n_resamples=500)
    assert not res.exact and res.n_resamples == 500
    assert res.p_value == pytest.approx(1 / 501, rel=1e-12)


def _on_common_scale(x, stat, groups):
    """The system column as ranks (Spearman) or z-scores (Pearson) within each stratum."""
    x = x.copy()
    for g in groups:
        c = x[g, 0]
        x[g, 0] = stats.rankdata(c) if stat == "spearman" else (c - c.mean()) / c.std()
    return x


def _stratified_corr(x, stat, groups):
    rank = stats.rankdata if stat == "spearman" else np.asarray
    return np.mean([np.corrcoef(rank(x[g, 0]), rank(x[g, 1]))[0, 1] for g in groups])


def test_exact_permutation_of_correlations_swaps_per_stratum_ranks_or_z_scores():
    """The documented swap for a correlation: the system column is turned into ranks
    (Spearman) or z-scores (Pearson) within each stratum, then each of the 2^8 swaps is
    scored here. b's cosines live on another scale (x 3 + 5), a's spread is well under 1."""
    rng = np.random.default_rng(11)
    gold = rng.random(8)
    a = np.stack([0.2 * (gold + 0.3 * rng.standard_normal(8)), gold], 1)
    b = np.stack([3 * (gold + 0.3 * rng.standard_normal(8)) + 5, gold], 1)
    strata = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    groups = [strata == s for s in (0, 1)]
    for stat in ("spearman", "pearson"):
        ea, eb = _on_common_scale(a, stat, groups), _on_common_scale(b, stat, groups)
        delta = _stratified_corr(a, stat, groups) - _stratified_corr(b, stat, groups)
        flips = []
        for s in itertools.product([False, True], repeat=8):
            swap = np.array(s)[:, None]
            flips.append(_stratified_corr(np.where(swap, eb, ea), stat, groups)
                         - _stratified_corr(np.where(swap, ea, eb), stat, groups))
        brute = np.mean(np.abs(flips) >= abs(delta) - 1e-12)
        assert 0.05 < brute < 0.95
        res = paired_permutation(a, b, statistic=stat, strata=strata, n_resamples=256)
        assert res.exact and res.delta == pytest.approx(delta)
        assert res.p_value == pytest.approx(brute)


def test_permutation_p_value_does_not_depend_on_the_units_of_the_scores():
    """Ties |swapped delta| == |delta| (integer item differences, counted exactly here with
    integers) still count when the scores are large and every mean is rounded: the same p
    for scores x 1000.1 + 1e4, as the rounding tolerance grows with |delta|."""
    u = np.array([3, 1, 4, 1, 5, 2, 2, 0, 3, 1])
    v = np.array([1, 2, 1, 1, 2, 3, 0, 2, 1, 3])
    signs = np.array(list(itertools.product([1, -1], repeat=10)))
    brute = np.mean(np.abs(signs @ (u - v)) >= abs((u - v).sum()))
    for scale, shift in ((1.0, 0.0), (1000.1, 1e4)):
        res = paired_permutation(u * scale + shift, v * scale + shift, n_resamples=1024)
        assert res.p_value == pytest.approx(brute)


def _toy(items, *, task="toy", metric="credit", main=None):
    """TaskScores of an unregistered task (its main score averages every subset) from
    per-item arrays {(view, subset, column): values}; main: {view: main score} (0.5)."""
    from disembed.evaluation.task_scores import ScoreRow, TaskScores

    views = list(dict.fromkeys(k[0] for k in items))
    rows = [ScoreRow(v, s, metric, float(np.mean(x)), len(x)) for (v, s, _), x in items.items()]
    averages = [ScoreRow(v, "avg:all", metric, (main or {}).get(v, 0.5), 1) for v in views]
    return TaskScores(task, metric, "avg:all", rows=rows, averages=averages,
                      per_item={k: np.asarray(x, np.float64) for k, x in items.items()})


def test_comparison_from_dict_reads_null_numbers_as_nan():
    """Saved comparisons go through JSON, where nan is null (the permutation test has no
    interval); from_dict turns null back into nan and keeps every other value."""
    from disembed.util.jsonsafe import json_safe

    boot = PairedTest(0.8, 0.6, 0.2, 0.01, 0.05, 0.35, 40, 2000)
    perm = PairedTest(0.8, 0.6, 0.2, 0.02, float("nan"), float("nan"), 40, 1024, True)
    saved = json.loads(json.dumps(json_safe(
        Comparison("toy", "meaning", "avg:all", "credit", "x", "y", boot, perm).to_dict())))
    assert saved["permutation"]["ci_low"] is None and saved["winner"] == "x"
    back = Comparison.from_dict(saved)
    assert back.bootstrap == boot and back.winner == "x"
    np.testing.assert_equal(asdict(back.permutation), asdict(perm))


def test_compare_scores_refuses_other_tasks_and_other_items():
    de = _toy({("meaning", "de", "credit"): np.ones(30)})
    with pytest.raises(ConfigError, match="cannot compare task 'toy' with task 'other'"):
        compare_scores(de, _toy({("meaning", "de", "credit"): np.ones(30)}, task="other"))
    fr = _toy({("meaning", "fr", "credit"): np.ones(30)})  # as many items, other subset
    with pytest.raises(ShapeError, match=r"^toy \[meaning\]: the two results cover different "
                                         r"items .*evaluate both with the same task options$"):
        compare_scores(de, fr)


def test_compare_scores_runs_both_tests_on_the_stratified_items_of_the_view():
    rng = np.random.default_rng(12)
    sizes = {"de": 20, "zh": 12}
    columns = {(view, s): rng.random(n) for view in ("meaning", "language")
               for s, n in sizes.items()}
    a = _toy({(v, s, "credit"): x + 0.1 for (v, s), x in columns.items()})
    b = _toy({(v, s, "credit"): x + 0.2 * rng.random(len(x)) for (v, s), x in columns.items()})
    strata = np.array([s for s, n in sizes.items() for _ in range(n)])
    for view, higher_is_better in (("meaning", True), ("language", False)):
        c = compare_scores(a, b, labels=("x", "y"), view=view, n_resamples=300, seed=4)
        assert (c.task, c.view, c.subset, c.metric, c.a, c.b) == (
            "toy", view, "avg:all", "credit", "x", "y")
        assert c.higher_is_better is higher_is_better  # less meaning in the language view
        items_a, items_b = (np.concatenate([x.per_item[(view, s, "credit")] for s in sizes])
                            for x in (a, b))
        options = {"strata": strata, "n_resamples": 300, "seed": 4}
        for got, test in ((c.bootstrap, paired_bootstrap), (c.permutation, paired_permutation)):
            np.testing.assert_equal(asdict(got), asdict(test(items_a, items_b, **options)))


def test_compare_all_skips_what_it_cannot_compare_and_goes_on():
    """Only tasks both methods ran, with per-item scores, only views both have, only finite
    main scores; a skipped task or view does not stop the ones after it."""
    rng = np.random.default_rng(13)

    def items(*views):
        return {(v, "de", "credit"): rng.random(25) for v in views}

    saved_y = _toy(items("meaning"), task="saved")
    saved_y.per_item = {}  # as read back from JSON
    t_x = _toy(items("meaning", "language"), task="t", main={"language": float("nan")})
    t_y = _toy(items("meaning", "language"), task="t")
    results = {"x": [_toy(items("meaning"), task="only_x"), _toy(items("meaning"), task="saved"),
                     t_x],
               "y": [saved_y, t_y]}
    got = compare_all(results, views=("absent", "language", "meaning"), n_resamples=300, seed=5)
    assert [(c.task, c.view, c.a, c.b) for c in got] == [("t", "meaning", "x", "y")]
    want = compare_scores(t_x, t_y, labels=("x", "y"), n_resamples=300, seed=5)
    np.testing.assert_equal(asdict(got[0]), asdict(want))
    default = compare_all({"x": [t_x], "y": [t_y]}, views=("meaning",))
    assert default[0].bootstrap.n_resamples == 2000
    np.testing.assert_equal(asdict(default[0]), asdict(compare_scores(
        t_x, t_y, labels=("x", "y"), n_resamples=2000, seed=0)))


def test_compare_averaged_uses_the_task_statistic_also_for_a_single_run():
    """A Spearman task (cosine and gold per item): the ensembles' scores are the per-subset
    Spearman correlations of the seed-averaged cosines, averaged over subsets."""
    rng = np.random.default_rng(14)
    gold = {"en-de": rng.random(15), "en-fr": rng.random(10)}

    def sts(noise):
        return _toy({(("meaning", s, "cosine") if col else ("meaning", s, "gold")):
                     (g + noise * rng.standard_normal(len(g)) if col else g)
                     for s, g in gold.items() for col in (True, False)}, metric="spearman")

    a, b = [sts(0.1)], [sts(0.5), sts(0.5)]
    got = compare_averaged(a, b, n_resamples=300, seed=2)

    def ensemble(runs):
        return np.mean([stats.spearmanr(np.mean([r.per_item[("meaning", s, "cosine")]
                                                 for r in runs], axis=0), g)[0]
                        for s, g in gold.items()])

    assert (got.score_a, got.score_b) == pytest.approx((ensemble(a), ensemble(b)))
    assert got.n_items == 25 and got.n_resamples == 300


def test_seed_comparisons_refuse_runs_on_other_items():
    """A run with another number of items, or of columns per item (one retrieval direction
    instead of two), is refused with the task and view named."""
    one = _toy({("meaning", "de", "credit"): np.ones(6)})
    more_items = _toy({("meaning", "de", "credit"): np.ones(7)})
    two_columns = _toy({("meaning", "de", "xx2en"): np.ones(6),
                        ("meaning", "de", "en2xx"): np.ones(6)})
    message = (r"^toy \[meaning\]: the runs cover different items .*; evaluate all of them "
               r"with the same task options$")
    for compare in (compare_seeds, compare_averaged):
        for other in (more_items, two_columns):
            with pytest.raises(ShapeError, match=message):
                compare([one], [one, other])


def test_compare_seeds_is_the_seed_bootstrap_of_the_task_items():
    rng = np.random.default_rng(15)
    sizes = {"de": 12, "zh": 8}
    a = [_seed_scores({s: rng.random(n) + 0.05 for s, n in sizes.items()}) for _ in range(2)]
    b = [_seed_scores({s: rng.random(n) for s, n in sizes.items()}) for _ in range(2)]
    strata = np.array([s for s, n in sizes.items() for _ in range(n)])

    def items(run):
        return np.concatenate([run.per_item[("meaning", s, "credit")] for s in sizes])

    want = seed_bootstrap([items(r) for r in a], [items(r) for r in b], strata=strata,
                          n_resamples=300, seed=6)
    np.testing.assert_equal(asdict(compare_seeds(a, b, n_resamples=300, seed=6)), asdict(want))
    for compare in (compare_seeds, compare_averaged):  # defaults: 2000 resamples, seed 0
        default = compare(a, b)
        assert default.n_resamples == 2000
        np.testing.assert_equal(asdict(default),
                                asdict(compare(a, b, n_resamples=2000, seed=0)))


def test_paired_inputs_are_checked_with_messages_that_say_what_was_given():
    """Issue 21.1 survivors: the shape checks of every paired test, word for word."""
    with pytest.raises(ShapeError) as err:
        paired_bootstrap([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])
    assert str(err.value) == ("paired tests need two (n, k) arrays of equal shape with n >= 2; "
                              "got (3, 1) and (4, 1)")
    for bad in (np.zeros((1, 1)), np.zeros((2, 2, 2))):  # one item; not (n, k)
        with pytest.raises(ShapeError, match="paired tests need two"):
            paired_bootstrap(bad, bad)
    assert paired_bootstrap([1.0, 2.0], [0.0, 1.5], n_resamples=10).n_items == 2  # n = 2 is fine
    with pytest.raises(ShapeError) as err:
        paired_bootstrap([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], strata=["a", "b"])
    assert str(err.value) == "strata must hold one label per item (3); got (2,)"
    with pytest.raises(ShapeError) as err:
        batched_statistic(np.zeros((1, 4, 1)), "pearson")
    assert str(err.value) == "pearson needs items with (system, gold) columns; got 1 column(s)"
    with pytest.raises(ConfigError) as err:
        batched_statistic(np.zeros((1, 4, 2)), "kendall")
    assert str(err.value) == "statistic must be 'mean', 'pearson' or 'spearman'; got 'kendall'"


def test_scores_are_computed_in_float64_whatever_the_input_precision():
    x = np.random.default_rng(3).normal(size=(4001, 2)).astype(np.float32)
    assert score(x) == float(np.mean(x.astype(np.float64)))  # the default statistic: mean
    assert score(x, "pearson") == score(x.astype(np.float64), "pearson")
    t32 = paired_bootstrap(x[:, :1], x[:, 1:], n_resamples=50)
    t64 = paired_bootstrap(x[:, :1].astype(np.float64), x[:, 1:].astype(np.float64),
                           n_resamples=50)
    assert (t32.delta, t32.ci_low, t32.ci_high) == (t64.delta, t64.ci_low, t64.ci_high)


def test_bootstrap_p_is_nan_when_no_resample_is_finite_and_counts_a_single_one():
    """Pearson on two items: a resample that draws one item twice has no correlation.
    With one such resample only, p is nan (nothing measured), not 1.0; with one finite
    resample, p = (not winning + 1) / 2."""
    a = np.array([[1.0, 1.0], [2.0, 3.0]])
    b = np.array([[1.0, 2.0], [2.0, 1.0]])
    seeds = {}
    for seed in range(50):
        draw = np.random.default_rng(seed).integers(0, 2, size=(1, 2))[0]
        seeds.setdefault(bool(draw[0] == draw[1]), seed)
    none_finite = paired_bootstrap(a, b, statistic="pearson", n_resamples=1,
                                   seed=seeds[True])
    assert none_finite.n_resamples == 0 and np.isnan(none_finite.p_value)
    one = paired_bootstrap(a, b, statistic="pearson", n_resamples=1, seed=seeds[False])
    assert one.n_resamples == 1 and one.p_value in (0.5, 1.0)


def test_task_items_follow_the_members_columns_and_metric_given():
    from disembed.analysis.significance import task_items

    scores = _toy({("meaning", "a", "cosine"): [0.1, 0.2, 0.3],
                   ("meaning", "b", "cosine"): [0.4, 0.5]})
    items, strata, statistic = task_items(scores, "meaning", members=["b"])  # only b
    np.testing.assert_array_equal(items, [[0.4], [0.5]])
    assert strata.tolist() == ["b", "b"] and statistic == "mean"  # no gold column: the mean
    items, strata, _ = task_items(scores, "meaning")  # default: every subset averaged
    assert items.shape == (5, 1) and strata.tolist() == ["a"] * 3 + ["b"] * 2
    with pytest.raises(ConfigError) as err:
        task_items(scores, "language")
    assert str(err.value) == (
        "toy: no per-item scores for view 'language', subset 'a'. Per-item scores exist only "
        "in TaskScores from a fresh evaluate() call (they are not saved in result JSON); "
        "re-run the evaluation in this process")
    graded = _toy({("meaning", "a", "cosine"): [0.1, 0.2], ("meaning", "a", "gold"): [1.0, 2.0]})
    with pytest.raises(ConfigError) as err:  # system and gold columns, metric 'credit'
        task_items(graded, "meaning")
    assert str(err.value) == "toy: cannot test metric 'credit'"
