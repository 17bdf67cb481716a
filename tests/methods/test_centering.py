"""``center="language"``: trained recipes on per-language-centred inputs; and the
``mean-centering`` recipe itself: calibration, persistence and its exported map."""

import json

import numpy as np
import pytest
import torch

from disembed.exceptions import CheckpointError, ConfigError
from disembed.methods import load_disentangler, make_method
from disembed.methods.base import config_digest
from disembed.methods.export_map import GLOBAL_ROUTE, apply_map

QUICK = {"max_epochs": 2, "batch_size": 64}


def language_means(toy_pairs):
    src, tgt, src_lang = toy_pairs
    X = np.concatenate([src, tgt])
    langs = np.concatenate([src_lang, np.full(len(tgt), "en", dtype=object)])
    return {lang: X[langs == lang].mean(axis=0) for lang in ("de", "en", "zh")}


@pytest.fixture
def centred_seed(toy_pairs):
    src, tgt, src_lang = toy_pairs
    return make_method("seed-centered", **QUICK).fit(src, tgt, src_lang, "en")


def head_parts(model, X):
    with torch.no_grad():
        m, lang = model.head_(torch.from_numpy(np.ascontiguousarray(X, np.float32)))
    return m.numpy(), lang.numpy()


def test_means_are_mean_centering_s_and_the_head_sees_centred_inputs(centred_seed, toy_pairs):
    means = language_means(toy_pairs)
    np.testing.assert_allclose(centred_seed.centering_.means_,
                               np.stack([means[k] for k in ("de", "en", "zh")]), atol=1e-5)
    X = toy_pairs[0][:8]
    m, lang = head_parts(centred_seed, X - centred_seed.centering_.means_[0])  # "de" is first
    np.testing.assert_allclose(centred_seed.meaning(X, "de"), m, atol=1e-6)
    np.testing.assert_allclose(centred_seed.language(X, "de"), lang + means["de"], atol=1e-5)


def test_seed_meaning_plus_language_is_the_input(centred_seed, toy_pairs):
    X = toy_pairs[0][:50]
    views = centred_seed.views(X, "zh")
    np.testing.assert_allclose(views["meaning"] + views["language"], X, atol=1e-5)


def test_centering_changes_what_is_learned(centred_seed, toy_pairs):
    src, tgt, src_lang = toy_pairs
    plain = make_method("seed", **QUICK).fit(src, tgt, src_lang, "en")
    assert not np.allclose(plain.meaning(src[:5], "de"), centred_seed.meaning(src[:5], "de"))


@pytest.mark.parametrize("name", ["seed-centered", "dream-centered", "oracle+meat-centered"])
def test_centred_models_save_and_load(name, toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    model = make_method(name, **QUICK).fit(src, tgt, src_lang, "en")
    model.save(tmp_path / "m")
    loaded = load_disentangler(tmp_path / "m")
    assert loaded.center == "language" and loaded.name == name
    for lang in ("de", "zh", "en"):
        a, b = model.views(src[:9], lang), loaded.views(src[:9], lang)
        np.testing.assert_array_equal(a["meaning"], b["meaning"])
        np.testing.assert_array_equal(a["language"], b["language"])


def test_unseen_language_follows_unknown_language(toy_pairs):
    src, tgt, src_lang = toy_pairs
    X = src[:6] + 5.0
    strict = make_method("seed-centered", unknown_language="error", **QUICK).fit(
        src, tgt, src_lang, "en")
    with pytest.raises(ConfigError, match="no mean for language 'fr'"):
        strict.meaning(X, "fr")
    assert make_method("seed-centered").unknown_language == "global"  # chosen on validation
    near = make_method("seed-centered", unknown_language="nearest", **QUICK).fit(
        src, tgt, src_lang, "en")
    # the identifier's mixture of the training languages' routes (issue 31: no argmax)
    w = near.language_id_.route_weights(X)  # (6, L)
    routes = [head_parts(near, X - near.centering_.means_[near.centering_.languages_.index(c)])
              [0] for c in near.language_id_.languages_]
    want = sum(w[:, [k]] * r for k, r in enumerate(routes))
    np.testing.assert_allclose(near.meaning(X, "fr"), want, atol=1e-5)
    np.testing.assert_allclose(near.meaning(X, "fr"), near.meaning(X), atol=1e-6)
    with pytest.raises(ConfigError, match="'batch'.*removed"):
        make_method("seed-centered", unknown_language="batch")
    glob = make_method("seed-centered", unknown_language="global", **QUICK).fit(
        src, tgt, src_lang, "en")
    mu = glob.centering_.means_.mean(axis=0)
    np.testing.assert_allclose(glob.meaning(X, "fr"), head_parts(glob, X - mu)[0], atol=1e-5)
    np.testing.assert_allclose(glob.language(X, "fr"), head_parts(glob, X - mu)[1] + mu,
                               atol=1e-5)


def test_bad_center_settings_are_clear_errors():
    with pytest.raises(ConfigError, match="center must be one of"):
        make_method("seed", center="mean")
    with pytest.raises(ConfigError, match="unknown_language must be"):
        make_method("seed", center="language", unknown_language="drop")


def test_config_and_weights_must_agree_on_centering(centred_seed, tmp_path):
    path = centred_seed.save(tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    config["params"]["center"] = "none"
    config["method"] = "seed"
    config["config_sha256"] = config_digest(config)  # sealed again: only the recipe checks
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="centering.means"):
        load_disentangler(path)


# --- mean-centering itself ---------------------------------------------------------------

@pytest.fixture
def centring(toy_pairs):
    src, tgt, src_lang = toy_pairs
    return make_method("mean-centering").fit(src, tgt, src_lang, "en")


def test_calibrate_sets_a_languages_mean_to_the_mean_of_its_rows(centring, toy_pairs):
    rows = toy_pairs[0][:9] * 2 + 1  # a new sample of 'de', far from the trained mean
    before = dict(zip(centring.languages_, centring.means_.copy(), strict=True))
    centring.calibrate(rows, "de")
    assert centring.languages_ == ["de", "en", "zh"]  # replaced in place, not appended
    np.testing.assert_allclose(centring.means_[0], rows.astype(np.float64).mean(axis=0),
                               rtol=1e-6)
    for i, lang in ((1, "en"), (2, "zh")):
        np.testing.assert_array_equal(centring.means_[i], before[lang])
    np.testing.assert_allclose(centring.meaning(rows, "de"), rows - rows.mean(axis=0), atol=1e-5)
    new = toy_pairs[1][:5] - 4
    centring.calibrate(new, "ar")
    assert centring.languages_ == ["de", "en", "zh", "ar"]
    np.testing.assert_allclose(centring.language(new, "ar"), np.tile(new.mean(axis=0), (5, 1)),
                               atol=1e-5)


def test_saved_and_calibrated_mean_centering_reloads_bit_identical(centring, toy_pairs, tmp_path):
    """Also the global fallback (the mean of the means): in-memory and saved means are both
    float32, so the reloaded model rounds as the one that was saved."""
    centring.calibrate(toy_pairs[1][:40] * 1.5 - 2, "ar")
    loaded = load_disentangler(centring.save(tmp_path / "m"))
    X = toy_pairs[0][:20]
    for lang in ("de", "ar", "ja"):  # trained, calibrated, unseen (global mean)
        np.testing.assert_array_equal(loaded.meaning(X, lang), centring.meaning(X, lang))
        np.testing.assert_array_equal(loaded.language(X, lang), centring.language(X, lang))


def test_restoring_means_of_the_wrong_shape_says_which(centring):
    d = centring.dim_
    with pytest.raises(CheckpointError, match=rf"means have shape \(2, {d}\), expected "
                                              rf"\(3, {d}\)"):
        centring.restore({"means": np.zeros((2, d), np.float32)},
                         {"languages": ["de", "en", "zh"]})


def test_mean_centering_map_subtracts_each_languages_mean(centring, toy_pairs):
    mmap = centring.meaning_map()
    assert (mmap.method, mmap.dim, mmap.by_language) == ("mean-centering", 16, True)
    assert sorted(mmap.routes) == sorted([*centring.languages_, GLOBAL_ROUTE])
    assert any(repr(GLOBAL_ROUTE) in note and "mean over all training languages" in note
               for note in mmap.notes)
    means = language_means(toy_pairs)
    X = toy_pairs[0][:10]
    for lang, mu in means.items():
        np.testing.assert_allclose(apply_map(mmap, X, lang), X - mu, atol=1e-5)
    mu = np.mean(list(means.values()), axis=0)
    np.testing.assert_allclose(apply_map(mmap, X, GLOBAL_ROUTE), X - mu, atol=1e-5)


def _two_language_centring(policy, dtype=np.float32):
    """A bare MeanCentering (no language identifier in front) on two languages whose means
    are far apart: de around +3, en around -3 on every axis."""
    from disembed.methods.mean_centering import MeanCentering

    g = np.random.default_rng(0)
    src = (g.normal(size=(20, 4)) * 0.1 + 3.0).astype(dtype)
    tgt = (g.normal(size=(20, 4)) * 0.1 - 3.0).astype(dtype)
    return MeanCentering(unknown_language=policy).fit(src, tgt, "de", "en"), src, tgt


def test_nearest_fallback_centres_each_row_with_its_closest_training_mean():
    """``unknown_language="nearest"`` on the recipe itself, where no language identifier
    chose the language first (a model saved before identifiers existed): row by row, the
    training mean at the smallest Euclidean distance, so rows of one call may differ."""
    model, src, tgt = _two_language_centring("nearest")
    model.language_id_ = None  # as a model saved before it had an identifier loads
    X = np.array([[2.5, 2.5, 2.5, 2.5], [-2.0, -2.0, -2.0, -2.0], [0.5, 0.4, 0.6, 0.5],
                  [-0.1, -0.2, 0.0, -0.1]], np.float32)
    mu = {"de": src.mean(axis=0), "en": tgt.mean(axis=0)}
    want = np.stack([mu["de"], mu["en"], mu["de"], mu["en"]])
    np.testing.assert_allclose(model.language(X, "fr"), want, rtol=1e-6)
    np.testing.assert_allclose(model.meaning(X, "fr"), X - want, rtol=1e-6)
    # batch invariance: each row alone gets the same mean
    for i in range(len(X)):
        np.testing.assert_array_equal(model.meaning(X[i:i + 1], "fr")[0], model.meaning(X, "fr")[i])


def test_unknown_language_error_and_the_one_log_line_per_language(caplog):
    model, _, _ = _two_language_centring("error")
    with pytest.raises(ConfigError) as err:
        model.meaning(np.zeros((1, 4), np.float32), "fr")
    assert str(err.value) == (
        "mean-centering has no mean for language 'fr'; it was fitted on ['de', 'en']. Fit on "
        "data with that language, calibrate it (disembed calibrate), or use "
        "unknown_language='nearest' or 'global'")
    model, _, _ = _two_language_centring("global")
    with caplog.at_level("INFO", logger="disembed.methods.mean_centering"):
        for _ in range(3):
            model.meaning(np.zeros((2, 4), np.float32), ["fr", "sw"])
    lines = [r.getMessage() for r in caplog.records]
    assert sorted(lines) == ["mean-centering: 'fr' unseen in training, using the global mean",
                             "mean-centering: 'sw' unseen in training, using the global mean"]


def test_a_bad_unknown_language_policy_says_what_is_allowed():
    from disembed.methods.mean_centering import check_unknown_language

    with pytest.raises(ConfigError) as err:
        check_unknown_language("closest")
    assert str(err.value) == ("unknown_language must be 'nearest', 'global' or 'error'; "
                              "got 'closest'")
    with pytest.raises(ConfigError) as err:
        check_unknown_language("batch")
    assert str(err.value) == (
        "unknown_language must be 'nearest', 'global' or 'error'; got 'batch' ('batch', "
        "centring by the rows of the call, was removed: a sentence's meaning must not depend "
        "on the rest of the call)")


def test_means_are_float32_whatever_the_input_precision():
    model, _, _ = _two_language_centring("global", dtype=np.float64)
    assert model.means_.dtype == np.float32
