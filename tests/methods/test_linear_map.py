"""linear-map: recovers known maps, keeps the solvers' constraints, and measures itself."""

import numpy as np
import pytest

from disembed.exceptions import ConfigError, DataError
from disembed.methods import load_disentangler, make_method
from disembed.methods.linear_map import fit_procrustes, improvement, map_diagnostics


@pytest.fixture
def mapped_pairs():
    """German rows x, English rows y = A x + b (+ tiny noise), for a known A, b."""
    rng = np.random.default_rng(5)
    n, d = 400, 8
    A = rng.standard_normal((d, d))
    b = rng.standard_normal(d)
    x = rng.standard_normal((n, d))
    y = x @ A.T + b + 1e-4 * rng.standard_normal((n, d))
    return x.astype(np.float32), y.astype(np.float32), A, b


def test_lstsq_recovers_a_known_map(mapped_pairs):
    x, y, A, b = mapped_pairs
    model = make_method("linear-map").fit(x, y, "de", "en")
    A_hat, b_hat = model.maps_["de"]
    np.testing.assert_allclose(A_hat, A, atol=1e-3)
    np.testing.assert_allclose(b_hat, b, atol=1e-3)
    np.testing.assert_allclose(model.meaning(x[:5], "de"), y[:5], atol=1e-2)
    np.testing.assert_array_equal(model.meaning(y[:5], "en"), y[:5])  # pivot: identity
    held = model.diagnostics_["de"]["heldout"]
    assert held["fD"] == 1.0 and held["fC"] > 0.9 and held["dD"] > 100 and held["n"] == 40


def test_ridge_shrinks_the_map_towards_zero(mapped_pairs):
    x, y, A, _ = mapped_pairs
    plain = make_method("linear-map").fit(x, y, "de", "en").maps_["de"][0]
    mild = make_method("linear-map", ridge=1e-3).fit(x, y, "de", "en").maps_["de"][0]
    strong = make_method("linear-map", ridge=1e4).fit(x, y, "de", "en").maps_["de"][0]
    np.testing.assert_allclose(mild, plain, atol=1e-3)
    assert np.linalg.norm(strong) < 0.5 * np.linalg.norm(plain)


def test_pairs_in_either_orientation_and_gradient_solver(mapped_pairs):
    x, y, A, b = mapped_pairs
    model = make_method("linear-map", solver="gradient", steps=200, lr=0.1).fit(
        y, x, "en", "de")  # English on the source side
    A_hat, b_hat = model.maps_["de"]
    assert np.abs(A_hat - A).max() < 0.05 and np.abs(b_hat - b).max() < 0.05


@pytest.mark.parametrize("solver", ["procrustes", "procrustes-dilation"])
def test_procrustes_solvers_keep_their_form(solver):
    rng = np.random.default_rng(1)
    d = 6
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    alpha = np.linspace(0.5, 2.0, d) if solver == "procrustes-dilation" else np.ones(d)
    x = rng.standard_normal((300, d))
    y = x @ (Q * alpha).T + 0.3
    A, b = fit_procrustes(x, y, dilation=solver == "procrustes-dilation")
    if solver == "procrustes":
        np.testing.assert_allclose(A.T @ A, np.eye(d), atol=1e-8)
    np.testing.assert_allclose(A, Q * alpha, atol=1e-6)
    np.testing.assert_allclose(b, 0.3, atol=1e-6)


def test_diagnostics_on_known_matrices():
    rot = map_diagnostics(np.array([[0.0, -1.0], [1.0, 0.0]]))
    assert rot["p_mean_abs"] == pytest.approx(0) and rot["alpha_cv"] == pytest.approx(0)
    # columns (1, 0) and (1, 1): cosine 1/sqrt(2); norms 1 and sqrt(2)
    m = map_diagnostics(np.array([[1.0, 1.0], [0.0, 1.0]]))
    assert m["p_mean_abs"] == pytest.approx(2 ** -0.5) and m["p_std"] == pytest.approx(0)
    assert m["alpha_mean"] == pytest.approx((1 + 2 ** 0.5) / 2)
    assert m["alpha_range"] == pytest.approx((2 ** 0.5 - 1) / m["alpha_mean"])
    # x = (0, 2), y = (2, 0): d = sqrt(8), cos = 0; mapped (2, 1): d~ = 1, cos~ = 2/sqrt(5)
    out = improvement(np.array([[0.0, 2.0]]), np.array([[2.0, 0.0]]), np.array([[2.0, 1.0]]))
    assert out["dD"] == pytest.approx((8 ** 0.5 - 1) / 1) and out["fD"] == 1.0
    assert out["dC"] == pytest.approx(2 / 5 ** 0.5) and out["fC"] == 1.0
    # a pair with x = y (d = 0) has no ratio: left out of dD, still counted in fD
    out = improvement(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[1.0, 0.0], [2.0, 0.0]]),
                      np.array([[1.0, 0.1], [2.0, 1.0]]))
    assert out["n_dD"] == 1 and out["dD"] == pytest.approx(8 ** 0.5 - 1) and out["fD"] == 0.5


def test_save_load_keeps_maps_and_diagnostics(mapped_pairs, tmp_path):
    x, y, _, _ = mapped_pairs
    model = make_method("linear-map", solver="procrustes").fit(x, y, "de", "en")
    loaded = load_disentangler(model.save(tmp_path / "m"))
    np.testing.assert_array_equal(loaded.meaning(x[:4], "de"), model.meaning(x[:4], "de"))
    assert loaded.diagnostics_ == model.diagnostics_  # JSON round trip of plain floats
    assert loaded.diagnostics_["de"]["matrix"]["p_mean_abs"] < 1e-6  # orthogonal map


def test_errors_say_what_to_do(mapped_pairs):
    x, y, _, _ = mapped_pairs
    with pytest.raises(ConfigError, match="solver must be one of"):
        make_method("linear-map", solver="svd")
    with pytest.raises(DataError, match="pivot language 'en'"):
        make_method("linear-map").fit(x, y, "de", "fr")
    strict = make_method("linear-map", unknown_language="error").fit(x, y, "de", "en")
    with pytest.raises(ConfigError, match="no map for 'zh'"):
        strict.meaning(x[:2], "zh")
    np.testing.assert_array_equal(make_method("linear-map").fit(x, y, "de", "en").meaning(
        x[:2], "zh"), x[:2])


def test_a_map_fitted_on_too_few_pairs_warns_about_its_rank(caplog):
    """Issue 22: linear-map on 20 pairs collapsed the meaning to rank 18 of 64, silently."""
    import logging

    import numpy as np

    from disembed.methods import make_method

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(20, 64)), rng.normal(size=(20, 64))
    with caplog.at_level(logging.WARNING, logger="disembed"):
        model = make_method("linear-map", heldout_fraction=0.0).fit(X, Y, "de", "en")
    assert model.diagnostics_["de"]["rank"] < 64
    assert "the de map has rank" in caplog.text and "collapses" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="disembed"):
        make_method("linear-map", heldout_fraction=0.0).fit(
            rng.normal(size=(200, 8)), rng.normal(size=(200, 8)), "de", "en")
    assert "collapses" not in caplog.text
