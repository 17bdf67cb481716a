import warnings

import numpy as np
import pytest
from scipy import stats

from disembed.evaluation.metrics import (
    correlation,
    paired_cosine,
    pearson,
    retrieval_accuracy,
    spearman,
)
from disembed.exceptions import ShapeError


def brute_force_accuracy(a, b):
    """Python-loop reference: argmax of cosine for each query, both directions."""
    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    a, b = unit(a.astype(np.float64)), unit(b.astype(np.float64))
    n = len(a)
    hits_ab = sum(int(np.argmax([a[i] @ b[j] for j in range(n)]) == i) for i in range(n))
    hits_ba = sum(int(np.argmax([b[i] @ a[j] for j in range(n)]) == i) for i in range(n))
    return hits_ab / n, hits_ba / n


def test_retrieval_identical_matrices_is_perfect():
    x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    r = retrieval_accuracy(x, x, block_size=7)
    assert r.acc_a2b == r.acc_b2a == r.main_score == 1.0


@pytest.mark.parametrize("block_size", [1, 13, 1024])
def test_retrieval_matches_brute_force(block_size):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((60, 6))
    b = a + 1.2 * rng.standard_normal((60, 6))  # noisy translations: some hits, some misses
    r = retrieval_accuracy(a, b, block_size=block_size)
    ab, ba = brute_force_accuracy(a, b)
    assert 0.0 < ab < 1.0 and ab != ba
    assert r.acc_a2b == pytest.approx(ab) and r.acc_b2a == pytest.approx(ba)
    assert r.correct_a2b.shape == (60,) and r.correct_a2b.mean() == pytest.approx(ab)


def test_retrieval_constant_vectors_score_chance_without_warnings():
    const = np.ones((40, 5), dtype=np.float32)
    zeros = np.zeros((40, 5), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert retrieval_accuracy(const, const).acc_mean == pytest.approx(1 / 40)
        assert retrieval_accuracy(zeros, zeros).acc_a2b == pytest.approx(1 / 40)


def test_retrieval_rejects_mismatched_shapes():
    with pytest.raises(ShapeError, match=r"\(3, 4\) and \(3, 5\)"):
        retrieval_accuracy(np.ones((3, 4)), np.ones((3, 5)))


def test_correlations_match_scipy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(100)
    y = 0.5 * x + rng.standard_normal(100)
    y[::10] = y[0]  # ties for the rank correlation
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    r = correlation(x, y)
    assert (r.pearson, r.spearman, r.n) == (pearson(x, y), spearman(x, y), 100)
    assert r.main_score == r.spearman


def test_constant_or_degenerate_inputs_give_nan_without_warnings():
    x = np.arange(10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(pearson(np.full(10, 0.3), x))
        assert np.isnan(spearman(x, np.full(10, 2.0)))
        assert np.isnan(pearson(x[:1], x[:1]))
        assert np.isnan(pearson(np.r_[x[:-1], np.nan], x))
        # cosines of a constant view: equal up to rounding, still "constant"
        noisy = 0.7 + 1e-16 * np.random.default_rng(3).standard_normal(10)
        assert np.isnan(spearman(noisy, x))


def test_paired_cosine_against_definition():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    want = [a[i] @ b[i] / np.linalg.norm(a[i]) / np.linalg.norm(b[i]) for i in range(5)]
    np.testing.assert_allclose(paired_cosine(a, b), want)
    with pytest.raises(ShapeError):
        paired_cosine(a, b[:4])


def test_pooled_retrieval_against_a_brute_force_loop():
    from disembed.evaluation.metrics import pooled_retrieval_accuracy

    rng = np.random.default_rng(3)
    a = rng.standard_normal((30, 8))
    b = a + 0.9 * rng.standard_normal((30, 8))
    pool = np.concatenate([a, b])
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    hits = 0
    for i in range(60):
        sims = [pool[i] @ pool[j] if j != i else -np.inf for j in range(60)]
        hits += int(np.argmax(sims) == (i + 30) % 60)
    assert pooled_retrieval_accuracy(a, b, block_size=7) == pytest.approx(hits / 60)


def test_pooled_retrieval_punishes_language_clusters_that_bitext_retrieval_ignores():
    from disembed.evaluation.metrics import pooled_retrieval_accuracy, retrieval_accuracy

    rng = np.random.default_rng(0)
    meaning = np.zeros((40, 16))
    meaning[:, :12] = rng.standard_normal((40, 12))
    meaning *= 2 / np.linalg.norm(meaning, axis=1, keepdims=True)  # equal norms: cosine = dot
    offset = np.r_[np.zeros(12), np.full(4, 1.0)]  # a language direction as long as meaning
    de, en = meaning + offset, meaning - offset
    assert retrieval_accuracy(de, en).acc_mean > 0.9  # xx->en never sees another German one
    assert pooled_retrieval_accuracy(de, en) < 0.05  # pooled: German finds German first
    assert pooled_retrieval_accuracy(de - offset, en + offset) > 0.9  # centred: translations
    constant = np.ones((5, 4))
    assert pooled_retrieval_accuracy(constant, constant) == pytest.approx(1 / 9)  # chance

