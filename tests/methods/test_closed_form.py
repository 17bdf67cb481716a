"""lir, lsar, leace: each paper's equations recomputed in plain numpy by another route, the
erasure each one promises, strict save/load, and the errors a user can hit."""

import hashlib
import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from disembed.exceptions import CheckpointError, ConfigError, DataError, ShapeError
from disembed.methods import load_disentangler, make_method
from disembed.methods.base import CONFIG_CHECKSUM, WEIGHTS_CHECKSUM, config_digest


@pytest.fixture
def five_languages():
    """``(src, tgt, src_lang)``: four source languages paired with English, d = 12.

    Each language adds its own offset and stretches its own direction, so language means
    differ in more than one direction and every language has a distinct top subspace.
    """
    rng = np.random.default_rng(7)
    n, d = 400, 12
    langs = ["de", "zh", "fr", "ar"]
    src_lang = np.array([langs[i % 4] for i in range(n)], dtype=object)
    meaning = rng.standard_normal((n, d))
    offset = {k: 2 * rng.standard_normal(d) for k in langs + ["en"]}
    stretch = {k: rng.standard_normal(d) for k in langs + ["en"]}

    def side(codes):
        coef = rng.standard_normal((len(codes), 1)) * 3
        return meaning + np.stack([offset[c] for c in codes]) + coef * np.stack(
            [stretch[c] for c in codes])

    src = side(src_lang)
    tgt = side(["en"] * n)
    return src.astype(np.float32), tgt.astype(np.float32), src_lang


def _rows(data, lang):
    """Training rows of ``lang`` (both sides), in float64."""
    src, tgt, src_lang = data
    X = np.concatenate([src, tgt]).astype(np.float64)
    langs = np.concatenate([src_lang, np.full(len(tgt), "en", dtype=object)])
    return X if lang is None else X[langs == lang]


def _top_singular(rows, r):
    """Top-``r`` right singular vectors of the raw (uncentred) rows, by SVD (the module uses
    the eigenvectors of ``rows^T rows``)."""
    return np.linalg.svd(rows, full_matrices=False)[2][:r].T


def _project_out(X, U):
    """Row by row: ``e - sum_j (u_j . e) u_j`` and the removed part."""
    removed = np.array([sum((u @ e) * u for u in U.T) for e in X])
    return X - removed, removed


# --- lir ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rank", [1, 3])
def test_lir_matches_its_equations(five_languages, rank):
    model = make_method("lir", rank=rank).fit(*five_languages, "en")
    assert model.languages_ == ["ar", "de", "en", "fr", "zh"]
    for lang in ("de", "en"):
        X = _rows(five_languages, lang)[:30]
        want_m, want_l = _project_out(X, _top_singular(_rows(five_languages, lang), rank))
        np.testing.assert_allclose(model.meaning(X, lang), want_m, atol=2e-5)
        np.testing.assert_allclose(model.language(X, lang), want_l, atol=2e-5)


def test_lir_removes_each_languages_top_directions(five_languages):
    rank = 2
    model = make_method("lir", rank=rank).fit(*five_languages, "en")
    for i, lang in enumerate(model.languages_):
        M = _rows(five_languages, lang)
        s = np.linalg.svd(M, compute_uv=False)
        meaning = model.meaning(M, lang).astype(np.float64)
        # nothing left along the removed directions, and they were the top ones:
        np.testing.assert_allclose(meaning @ model.components_[i], 0, atol=1e-3)
        assert np.linalg.svd(meaning, compute_uv=False)[0] == pytest.approx(s[rank], rel=1e-4)
        removed = np.linalg.norm(model.language(M, lang).astype(np.float64)) ** 2
        assert removed == pytest.approx((s[:rank] ** 2).sum(), rel=1e-4)
    # another language's directions differ: using them changes the output
    X = _rows(five_languages, "de")[:5]
    assert not np.allclose(model.meaning(X, "de"), model.meaning(X, "zh"), atol=1e-2)


def test_lir_unseen_language_policies(five_languages):
    src, tgt, src_lang = five_languages
    keep = src_lang != "ar"
    train = (src[keep], tgt[keep], src_lang[keep])
    unseen = _rows(five_languages, "ar")[:40]
    with pytest.raises(ConfigError, match="no subspace for language 'ar'"):
        make_method("lir", unknown_language="error").fit(*train, "en").meaning(unseen, "ar")
    with pytest.raises(ConfigError, match="unknown_language must be"):
        make_method("lir", unknown_language="drop")

    near = make_method("lir", rank=2, unknown_language="nearest").fit(*train, "en")
    w = near.language_id_.route_weights(unseen)  # the identifier's mixture, no argmax
    want = sum(w[:, [k]] * _project_out(unseen, near.components_[near.languages_.index(c)])[0]
               for k, c in enumerate(near.language_id_.languages_))
    np.testing.assert_allclose(near.meaning(unseen, "ar"), want, atol=2e-5)
    np.testing.assert_allclose(near.meaning(unseen[:1], "ar"), want[:1], atol=2e-5)
    # calibrating 'ar' from its unlabeled rows gives it its own directions
    near.calibrate(unseen, "ar")
    want, _ = _project_out(unseen, _top_singular(unseen, 2))
    np.testing.assert_allclose(near.meaning(unseen, "ar"), want, atol=2e-5)

    glob = make_method("lir", rank=2).fit(*train, "en")  # the default: global
    pooled = np.concatenate([train[0], train[1]]).astype(np.float64)
    want, _ = _project_out(unseen, _top_singular(pooled, 2))
    np.testing.assert_allclose(glob.meaning(unseen, "ar"), want, atol=2e-5)
    # a mixed batch: seen rows use their own language's subspace
    mixed = np.concatenate([unseen[:3], _rows(five_languages, "de")[:3]])
    out = glob.meaning(mixed, ["ar"] * 3 + ["de"] * 3)
    np.testing.assert_array_equal(out[3:], glob.meaning(mixed[3:], "de"))


def test_lir_rank_is_validated(five_languages):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="rank must be an integer"):
            make_method("lir", rank=bad)
    with pytest.raises(ConfigError, match="below the embedding dimension 12"):
        make_method("lir", rank=12).fit(*five_languages, "en")
    src, tgt, src_lang = five_languages
    with pytest.raises(DataError, match="at least 5 sentences of language 'ar'; got 1"):
        make_method("lir", rank=5).fit(src[:4], tgt[:4], src_lang[:4], "en")


# --- lsar --------------------------------------------------------------------------------

def _official_lsar_projector(means, r):
    """The authors' algorithm, written from its maths: rank-r fit around the mean of the
    means, re-centred at ``mu = (M'^+)^T 1 / |(M'^+)^T 1|^2``, top-r left singular vectors."""
    M = means.T  # (d, L)
    L = M.shape[1]
    ones = np.ones(L)
    bar = M @ ones / L
    U, s, Vt = np.linalg.svd(M - np.outer(bar, ones))
    fit = np.outer(bar, ones) + U[:, :r] @ np.diag(s[:r]) @ Vt[:r]
    mu = np.linalg.pinv(fit).T @ ones
    mu /= mu @ mu
    Ms = np.linalg.svd(fit - np.outer(mu, ones))[0][:, :r]
    return Ms @ Ms.T


def _language_means(data):
    langs = ["ar", "de", "en", "fr", "zh"]
    return langs, np.stack([_rows(data, k).mean(axis=0) for k in langs])


@pytest.mark.parametrize("rank", [1, 2, None])
def test_lsar_matches_the_papers_algorithm(five_languages, rank):
    model = make_method("lsar", rank=rank).fit(*five_languages, "en")
    langs, means = _language_means(five_languages)
    r = rank or len(langs) - 1
    assert model.rank_ == r and model.components_.shape == (12, r)
    P = _official_lsar_projector(means, r)
    np.testing.assert_allclose(model.components_ @ model.components_.T, P, atol=1e-5)
    X = _rows(five_languages, "zh")[:20]
    want_m = np.array([e - P @ e for e in X])
    for lang in ("zh", "ja", None):  # language-agnostic: the code given does not matter
        np.testing.assert_allclose(model.meaning(X, lang), want_m, atol=2e-5)
        np.testing.assert_allclose(model.language(X, lang), X - want_m, atol=2e-5)


def test_lsar_makes_language_means_identical(five_languages):
    langs, means = _language_means(five_languages)
    full = make_method("lsar").fit(*five_languages, "en")
    after = np.stack([full.meaning(_rows(five_languages, k), k).mean(axis=0) for k in langs])
    spread_before = np.abs(means - means.mean(axis=0)).max()
    assert np.abs(after - after.mean(axis=0)).max() < 1e-5 * spread_before
    # rank 1 removes exactly the top direction of the centred means
    one = make_method("lsar", rank=1).fit(*five_languages, "en")
    after = np.stack([one.meaning(_rows(five_languages, k), k).mean(axis=0) for k in langs])
    s = np.linalg.svd(means - means.mean(axis=0), compute_uv=False)
    left = np.linalg.norm(after - after.mean(axis=0)) ** 2
    assert left == pytest.approx((s[1:] ** 2).sum(), rel=1e-4)
    assert one.singular_values_ == pytest.approx(s.tolist(), rel=1e-6)


def test_lsar_rank_errors(five_languages):
    with pytest.raises(ConfigError, match=r"below the number of training languages \(5: ar, "):
        make_method("lsar", rank=5).fit(*five_languages, "en")
    for bad in (0, 2.0, False):
        with pytest.raises(ConfigError, match=r"rank must be an integer in \[1, inf\) or None"):
            make_method("lsar", rank=bad)
    src, tgt, _ = five_languages
    with pytest.raises(DataError, match="at least two training languages"):
        make_method("lsar").fit(src, tgt, "en", "en")
    twice = (np.concatenate([src, src]), np.concatenate([tgt, tgt]), ["de"] * 400 + ["fr"] * 400)
    with pytest.raises(DataError, match="span only 1 dimensions"):  # de and fr share a mean
        make_method("lsar", rank=2).fit(*twice, "en")


# --- leace -------------------------------------------------------------------------------

def _one_hot(data):
    src, tgt, src_lang = data
    langs = np.concatenate([src_lang, np.full(len(tgt), "en", dtype=object)])
    codes = sorted(set(langs))
    return np.array([[float(x == c) for c in codes] for x in langs])


def _moments(X, Z):
    mu = X.mean(axis=0)
    Xc, Zc = X - mu, Z - Z.mean(axis=0)
    return mu, Xc.T @ Xc / len(X), Xc.T @ Zc / len(X)


def test_leace_matches_the_closed_form(five_languages):
    """Full-rank covariance: ``W^+ P W = S_XZ (S_ZX S_XX^-1 S_XZ)^+ S_ZX S_XX^-1``, no roots."""
    model = make_method("leace").fit(*five_languages, "en")
    X, Z = _rows(five_languages, None), _one_hot(five_languages)
    mu, Sxx, Sxz = _moments(X, Z)
    inv = np.linalg.inv(Sxx)
    A = Sxz @ np.linalg.pinv(Sxz.T @ inv @ Sxz) @ Sxz.T @ inv  # (d, d)
    batch = X[::37]
    want_l = np.array([A @ (x - mu) for x in batch])
    np.testing.assert_allclose(model.language(batch, "de"), want_l, atol=5e-5)
    np.testing.assert_allclose(model.meaning(batch, "fr"), batch - want_l, atol=5e-5)
    assert model.proj_left_.shape == (12, 4)  # q = L - 1 for 5 languages


def _leace_by_eigh(X, Z):
    """``r(x)`` by the paper's formula with an eigh pseudo-whitening and ``P = B B^+``."""
    mu, Sxx, Sxz = _moments(X, Z)
    lam, V = np.linalg.eigh(Sxx)
    keep = lam > lam.max() * 1e-10
    W = V[:, keep] @ np.diag(lam[keep] ** -0.5) @ V[:, keep].T
    W_plus = V[:, keep] @ np.diag(lam[keep] ** 0.5) @ V[:, keep].T
    B = W @ Sxz
    return lambda x: x - W_plus @ (B @ np.linalg.pinv(B)) @ W @ (x - mu)


def test_leace_rank_deficient_covariance(five_languages):
    """Fewer sentences (20) than twice the dimension, embeddings in a 6-d subspace of 12."""
    src, tgt, src_lang = five_languages
    basis = np.random.default_rng(3).standard_normal((6, 12))
    data = ((src[:10, :6] @ basis).astype(np.float32), (tgt[:10, :6] @ basis).astype(np.float32),
            src_lang[:10])
    model = make_method("leace").fit(*data, "en")
    X, Z = _rows(data, None), _one_hot(data)
    eraser = _leace_by_eigh(X, Z)
    want = np.array([eraser(x) for x in X])
    np.testing.assert_allclose(model.meaning(X, "de"), want, atol=1e-4)
    _assert_linearly_erased(model.meaning(X, "de"), Z, X)


def _assert_linearly_erased(erased, Z, raw):
    """Cross-covariance ~0 and a least-squares probe no better than the constant predictor."""
    erased = erased.astype(np.float64)
    before = np.abs(_moments(raw, Z)[2]).max()
    assert np.abs(_moments(erased, Z)[2]).max() < 1e-5 * before

    def probe_mse(F):
        # The erased directions keep float32 rounding residue (~1e-8 of the top singular
        # value), correlated with x and so with the language: an unregularised probe that
        # divides by it reads rounding errors. Singular values under 1e-6 count as zero.
        F1 = np.hstack([F, np.ones((len(F), 1))])
        coef, *_ = np.linalg.lstsq(F1, Z, rcond=1e-6)
        return ((F1 @ coef - Z) ** 2).mean()

    constant = ((Z - Z.mean(axis=0)) ** 2).mean()
    assert probe_mse(erased) == pytest.approx(constant, rel=1e-5)
    assert probe_mse(raw) < 0.9 * constant  # the check could fail: raw X predicts the language


def test_leace_erases_language_linearly(five_languages, toy_pairs):
    for data in (five_languages, toy_pairs):
        model = make_method("leace").fit(*data, "en")
        X = _rows(data, None)
        _assert_linearly_erased(model.meaning(X, "en"), _one_hot(data), X)


def test_leace_needs_two_languages(five_languages):
    with pytest.raises(DataError, match="at least two training languages"):
        make_method("leace").fit(five_languages[0], five_languages[1], "en", "en")


# --- all three: persistence and shapes ---------------------------------------------------

PARAMS = {"lir": {"rank": 2, "unknown_language": "global"}, "lsar": {"rank": 2}, "leace": {}}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_save_load_gives_identical_outputs(name, five_languages, tmp_path):
    model = make_method(name, **PARAMS[name]).fit(*five_languages, "en")
    loaded = load_disentangler(model.save(tmp_path / "m"))
    assert loaded.get_params() == model.get_params()
    X = _rows(five_languages, "fr")[:25]
    for lang in ("fr", "en", "ja"):  # ja: unseen, lir falls back to the global subspace
        np.testing.assert_array_equal(loaded.meaning(X, lang), model.meaning(X, lang))
        np.testing.assert_array_equal(loaded.language(X, lang), model.language(X, lang))


def _rewrite(path, state, *, declare_shapes=True):
    """Replace the weights (and their recorded checksum, so the file is not "corrupt"), and
    with ``declare_shapes`` the shapes config.json declares, so only the recipe checks."""
    save_file(state, str(path / "model.safetensors"))
    config = json.loads((path / "config.json").read_text())
    if declare_shapes:
        config["state"] = {k: list(v.shape) for k, v in state.items()}
    config[WEIGHTS_CHECKSUM] = hashlib.sha256((path / "model.safetensors").read_bytes()
                                              ).hexdigest()
    config[CONFIG_CHECKSUM] = config_digest(config)
    (path / "config.json").write_text(json.dumps(config))


BAD_STATES = {
    "lir": [{"components": np.zeros((5, 12, 3), np.float32),
             "global_components": np.zeros((12, 3), np.float32)},
            {"components": np.zeros((4, 12, 2), np.float32),
             "global_components": np.zeros((12, 2), np.float32)}],
    "lsar": [{"components": np.zeros((12, 3), np.float32)},
             {"components": np.zeros((8, 2), np.float32)}],
    "leace": [{"mean": np.zeros(12, np.float32), "proj_left": np.zeros((12, 3), np.float32),
               "proj_right": np.zeros((2, 12), np.float32)},
              {"mean": np.zeros(12, np.float32), "proj_left": np.zeros((12, 5), np.float32),
               "proj_right": np.zeros((5, 12), np.float32)}],
}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_strict_load_rejects_wrong_keys_and_shapes(name, five_languages, tmp_path):
    model = make_method(name, **PARAMS[name]).fit(*five_languages, "en")
    path = model.save(tmp_path / "m")
    state = dict(model.saved_state()[0])
    dropped = sorted(state)[0]
    _rewrite(path, {k: v for k, v in state.items() if k != dropped}, declare_shapes=False)
    with pytest.raises(CheckpointError, match=rf"missing keys \['{dropped}'\]"):
        load_disentangler(path)
    for bad in BAD_STATES[name]:  # consistent with config.json, wrong for the recipe
        _rewrite(path, bad)
        with pytest.raises(CheckpointError, match="do not fit"):
            load_disentangler(path)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_wrong_dimension_says_what_it_expects(name):
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((2, 300, 384)).astype(np.float32)
    model = make_method(name).fit(src, tgt, ["de", "zh"] * 150, "en")
    cls = type(model).__name__
    with pytest.raises(ShapeError, match=f"X has 768 features, but this {cls} expects 384"):
        model.meaning(np.zeros((2, 768), np.float32), "de")


# --- real data (slow) --------------------------------------------------------------------

@pytest.mark.slow
def test_language_id_probe_drops_on_real_embeddings():
    """use-m3 on Tatoeba: fit on 300 pairs per language, probe 200 held-out pairs per language.

    Measured once (use-m3, de/fr/zh/es + en, chance 0.50): raw 0.81; meaning part of
    lir 0.50, lsar 0.43, leace 0.42 (mean-centering 0.46).
    """
    import os
    from pathlib import Path

    from disembed.analysis.leakage import language_id_probe
    from disembed.data.tatoeba import load_tatoeba
    from disembed.encoders import load_encoder
    from disembed.encoders.cached import cached

    data = Path(os.environ.get("DISEMBED_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))
    if not (data / "tatoeba").is_dir():
        pytest.skip("needs the real data directory")
    encoder = cached(load_encoder("use-m3"))
    langs = ["de", "fr", "zh", "es"]
    src, tgt, src_lang, test, test_lang = [], [], [], [], []
    for k in langs:
        pairs = load_tatoeba(k, data_dir=data)
        S, E = encoder.encode(pairs.source[:500]), encoder.encode(pairs.english[:500])
        src.append(S[:300]), tgt.append(E[:300])
        src_lang += [k] * 300
        test += [S[300:], E[300:]]
        test_lang += [k] * 200 + ["en"] * 200
    src, tgt, X = np.concatenate(src), np.concatenate(tgt), np.concatenate(test)
    test_lang = np.array(test_lang, dtype=object)
    raw = language_id_probe(X, test_lang)
    assert raw.accuracy > raw.chance + 0.2  # the raw embedding knows the language
    for name in ("lir", "lsar", "leace"):
        model = make_method(name).fit(src, tgt, src_lang, "en")
        meaning = np.concatenate([model.meaning(X[test_lang == k], k) for k in langs + ["en"]])
        labels = np.concatenate([test_lang[test_lang == k] for k in langs + ["en"]])
        probe = language_id_probe(meaning, labels)
        assert probe.accuracy < raw.accuracy - 0.2, name
        assert probe.accuracy < probe.chance + 0.05, name


def test_leace_keeps_at_most_one_direction_fewer_than_languages_and_reloads(tmp_path):
    """Whitening near-zero-variance directions (real encoders have them) once amplified the
    rounding noise of the zero singular value into an extra erased direction, and the
    saved model could not be loaded again."""
    from disembed.methods import load_disentangler, make_method

    rng = np.random.default_rng(0)
    langs = np.array(["de", "fr", "zh", "en"] * 500, dtype=object)
    offsets = {lang: rng.standard_normal(64) for lang in ("de", "fr", "zh", "en")}
    scales = np.logspace(0, -6, 64)  # variances over 12 orders of magnitude, as in encoders
    X = (rng.standard_normal((2000, 64)) * scales + np.stack([offsets[x] for x in langs])
         ).astype(np.float32)
    model = make_method("leace").fit(X[:1000], X[1000:], langs[:1000], langs[1000:])
    assert model.proj_left_.shape[1] <= len(model.languages_) - 1
    again = load_disentangler(model.save(tmp_path / "leace"))
    np.testing.assert_array_equal(again.meaning(X[:5], "de"), model.meaning(X[:5], "de"))
