"""The bfloat16 error bound holds on every pair, and is small enough to certify most lists."""

import numpy as np
import pytest
import torch

from disembed.retrieval.bf16 import ULP_BF16, RoundingStats, certified, gamma


@pytest.mark.parametrize("scale", [1.0, 1e-3, 50.0])
def test_float32_score_never_exceeds_bfloat16_score_plus_delta(scale):
    rng = np.random.default_rng(0)
    x = (scale * rng.standard_normal((300, 384))).astype(np.float32)
    y = (rng.standard_normal((500, 384)) * rng.uniform(0.1, 3, (500, 1))).astype(np.float32)
    s = x.astype(np.float64) @ y.astype(np.float64).T
    s_bf = (torch.from_numpy(x).bfloat16() @ torch.from_numpy(y).bfloat16().T).double().numpy()
    qx, qy = RoundingStats.of(x), RoundingStats.of(y)
    delta = (ULP_BF16 * np.abs(s_bf) + qx.err[:, None] * qy.norm.max()
             + qx.norm_bf[:, None] * qy.err.max()
             + gamma(384) * (qx.norm_bf[:, None] * qy.norm_bf.max() + qx.norm[:, None]
                             * qy.norm.max()))
    assert (s <= s_bf + delta).all()
    assert np.abs(s - s_bf).max() > 0  # bfloat16 really is coarser


def test_certificate_accepts_clear_gaps_and_rejects_close_calls():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 8)).astype(np.float32)
    db = rng.standard_normal((10, 8)).astype(np.float32)
    sq, sdb = RoundingStats.of(q), RoundingStats.of(db)
    m = np.array([0.5, 0.5])
    ok = certified(np.array([0.9, 0.5001]), m, sq, sdb, 8)
    assert ok.tolist() == [True, False]


def test_most_lists_are_certified_on_unit_vectors(caplog):
    """The bound is tight enough to matter: random unit vectors, k=4, 20 candidates."""
    from knn_check import assert_exact_knn

    from disembed.retrieval import KnnOptions, knn

    rng = np.random.default_rng(2)
    x = rng.standard_normal((400, 64)).astype(np.float32)
    y = rng.standard_normal((3000, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    caplog.set_level("INFO", logger="disembed.retrieval.knn")
    D, I = knn(x, y, 4, KnnOptions(precision="bfloat16"))  # noqa: E741
    assert_exact_knn(D, I, x, y, 4)
    certified_lists = int(caplog.text.split("bfloat16 k-NN: ")[1].split()[0])
    assert certified_lists >= 0.9 * len(x), caplog.text


# Near-ties (issue 21): each case is a list that a bound cut down to fewer terms would
# certify although a row left out of the candidates really scores higher in float32.

def _stats(err, norm, norm_bf):
    from disembed.retrieval.bf16 import RoundingStats as RS

    return RS(np.asarray(err, float), np.asarray(norm, float), np.asarray(norm_bf, float))


def test_certificate_rejects_a_tie_hidden_by_database_rounding():
    """Both database rows round to the same bfloat16 row, so their bfloat16 scores tie at
    0; the row left out is the better one in float32. The one-ulp term is 0 at m = 0."""
    x = np.array([[1.0, 1.0]], np.float32)
    kept = np.array([1 + 2.0**-10, -1.0], np.float32)
    left_out = np.array([1 + 2.0**-9, -1.0], np.float32)
    db = np.stack([kept, left_out])
    s_bf = (torch.from_numpy(x).bfloat16() @ torch.from_numpy(db).bfloat16().T).float()
    assert s_bf.tolist() == [[0.0, 0.0]]  # a bfloat16 tie
    s = x.astype(np.float64) @ db.astype(np.float64).T
    assert s[0, 1] > s[0, 0]  # but the row left out wins in float32
    ok = certified(s[:, 0].astype(np.float32), s_bf[:, 0].numpy(), RoundingStats.of(x),
                   RoundingStats.of(db), 2)
    assert ok.tolist() == [False]


def test_certificate_rejects_a_tie_hidden_by_query_rounding():
    """The query is what rounds: both database rows are exact in bfloat16 and score 0
    against the rounded query; in float32 the row left out scores twice the kept one."""
    x = np.array([[1 + 2.0**-9, 1.0]], np.float32)
    db = np.array([[1.0, -1.0], [2.0, -2.0]], np.float32)
    s_bf = (torch.from_numpy(x).bfloat16() @ torch.from_numpy(db).bfloat16().T).float()
    assert s_bf.tolist() == [[0.0, 0.0]]
    s = x.astype(np.float64) @ db.astype(np.float64).T
    assert s[0, 1] > s[0, 0] > 0
    ok = certified(s[:, 0].astype(np.float32), s_bf[:, 0].numpy(), RoundingStats.of(x),
                   RoundingStats.of(db), 2)
    assert ok.tolist() == [False]


def test_certificate_needs_the_summation_term_for_long_vectors():
    """Inputs exact in bfloat16 (no rounding error) and m = 0: only gamma_d separates the
    bound from zero. A gap below gamma_d (||x~|| ||y~|| + ||x|| ||y||) is not certified,
    one above it is."""
    d = 4096
    q = _stats([0.0, 0.0], [1.0, 1.0], [1.0, 1.0])
    db = _stats([0.0] * 3, [1.0] * 3, [1.0] * 3)
    bound = gamma(d) * 2
    assert bound > 4e-4
    ok = certified(np.array([0.5 * bound, 1.001 * bound]), np.zeros(2), q, db, d)
    assert ok.tolist() == [False, True]


@pytest.mark.parametrize("m", [0.5, -0.5, 40.0])
def test_certificate_needs_one_ulp_of_m_either_sign(m):
    """Exact inputs, tiny d: the bound is one bfloat16 ulp of |m|. Half an ulp above m is
    not certified (also for negative m, where dropping the absolute value would make the
    bound negative); an ulp and a bit above is."""
    q = _stats([0.0], [1.0], [1.0])
    db = _stats([0.0] * 2, [1.0] * 2, [1.0] * 2)
    ulp = ULP_BF16 * abs(m)
    for gap, expected in ((0.5 * ulp, False), (1.01 * ulp, True)):
        ok = certified(np.array([m + gap]), np.array([m]), q, db, 2)
        assert ok.tolist() == [expected], (m, gap)


def test_certificate_uses_the_largest_database_row():
    """The bound takes the worst database row (max norm, max rounding error), not the first:
    a gap that row 0 would allow is refused because row 2 is larger and rounds worse."""
    q = _stats([0.01], [1.0], [1.0])
    db = _stats([0.0, 0.0, 0.02], [1.0, 1.0, 3.0], [1.0, 1.0, 3.0])
    full = 0.01 * 3.0 + 1.0 * 0.02 + gamma(8) * (3.0 + 3.0)
    small = 0.01 * 1.0 + gamma(8) * 2.0
    ok = certified(np.array([0.5 * (small + full), 1.01 * full]), np.zeros(2), q, db, 8)
    assert ok.tolist() == [False, True]


def test_gamma_is_d_u_over_1_minus_d_u():
    """Higham's gamma_d = d u / (1 - d u), u = 2^-24, at two values of d u worked by hand."""
    assert gamma(2**23) == 1.0  # (1/2) / (1/2)
    assert gamma(2**22) == 1 / 3  # (1/4) / (3/4)


def test_certificate_is_strict_at_equality():
    """``kth > m + delta`` (module docstring): a k-th value exactly at the bound is not
    certified (a row left out could tie it, and then the lower index must win, so it has to
    be a candidate), one float64 step above is. Exact inputs, so delta = 2^-7 |m| = 2^-8
    (the 1e-30 vanishes beside 0.5)."""
    q = _stats([0.0], [0.0], [0.0])
    db = _stats([0.0] * 2, [1.0] * 2, [1.0] * 2)
    at = 0.5 + 2.0**-8
    ok = certified(np.array([at, np.nextafter(at, 1)]), np.array([0.5, 0.5]), q, db, 8)
    assert ok.tolist() == [False, True]


def test_certificate_bound_is_the_documented_delta():
    """Rows of different sizes and rounding errors, m of both signs: the bound sits at delta
    written out as in the module docstring (norm and error maxima over the database)."""
    q = _stats([0.01, 0.002], [2.0, 0.5], [2.01, 0.49])
    db = _stats([0.003, 0.02, 0.0], [1.0, 4.0, 0.5], [1.01, 3.98, 0.5])
    d, m = 384, np.array([0.3, -0.7])
    g = d * 2.0**-24 / (1 - d * 2.0**-24)
    delta = (2.0**-7 * np.abs(m) + q.err * 4.0 + q.norm_bf * 0.02
             + g * (q.norm_bf * 3.98 + q.norm * 4.0) + 1e-30)
    step = 1e-9 * np.abs(m + delta)
    assert certified(m + delta + step, m, q, db, d).tolist() == [True, True]
    assert certified(m + delta - step, m, q, db, d).tolist() == [False, False]


def test_certificate_keeps_an_absolute_margin_near_underflow():
    """Rows of size 1e-20: their float32 products (1e-40) are subnormal, where the relative
    bounds do not hold. The relative terms (about 1e-44) would certify a gap of 1e-31; the
    absolute 1e-30 in delta does not, a gap of 2e-30 passes."""
    q = _stats([0.0] * 2, [1e-20] * 2, [1e-20] * 2)
    db = _stats([0.0], [1e-20], [1e-20])
    ok = certified(np.array([1e-31, 2e-30]), np.zeros(2), q, db, 384)
    assert ok.tolist() == [False, True]


def test_rounding_stats_bound_those_of_the_float32_rows_from_above():
    """The search sees float32 rows, so a float64 or big-endian matrix has the statistics of
    its float32 rounding: ||x~ - x||, ||x||, ||x~|| with x~ = bfloat16(x), in blocks or not.
    They are computed in float32 and inflated by their rounding bound: never below the
    float64 values (the certificate needs upper bounds), within 1e-4 relative of them; rows
    whose squares under- or overflow float32 (1e-30, 1e25) are exact."""
    x64 = np.random.default_rng(4).standard_normal((7, 300)) * [[1e-3], [1], [10], [1], [1e3],
                                                               [1e-30], [1e25]]
    x32 = x64.astype(np.float32)
    x, x_bf = x32.astype(np.float64), torch.from_numpy(x32).bfloat16().double().numpy()
    want = np.array([np.linalg.norm(x_bf - x, axis=1), np.linalg.norm(x, axis=1),
                     np.linalg.norm(x_bf, axis=1)])
    for a, block in ((x32, 16384), (x64, 16384), (x64, 2), (x32.astype(">f4"), 3)):
        got = RoundingStats.of(a, block=block)
        got = np.array([got.err, got.norm, got.norm_bf])
        assert (got >= want).all()
        np.testing.assert_allclose(got, want, rtol=1e-4)
        np.testing.assert_allclose(got[:, 5:], want[:, 5:], rtol=1e-12)
