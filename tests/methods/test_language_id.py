"""The language identifier fitted with every model that uses a language: predicts the
training languages, says "unknown" far from all of them, is saved with the model, answers
``meaning(X)`` without a tag, and ``calibrate`` adds a language."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from recipe_contract import fitted, toy_pairs

from disembed.exceptions import ConfigError
from disembed.methods import load_disentangler
from disembed.methods.language_id import UNKNOWN, LanguageIdentifier


def _labelled():
    src, tgt, src_lang = toy_pairs()  # the languages the contract's models train on
    X = np.concatenate([src, tgt])
    return X, np.concatenate([src_lang, np.full(len(tgt), "en", dtype=object)])


@pytest.mark.parametrize("kind", ["softmax", "centroid"])
def test_identifier_predicts_the_training_languages_and_flags_far_rows(kind):
    X, langs = _labelled()
    lid = LanguageIdentifier(kind).fit(X, langs)
    pred = lid.predict(X)
    assert (pred.codes == langs).mean() > 0.98
    assert pred.confidence.min() >= 0 and pred.confidence.max() <= 1
    rng = np.random.default_rng(0)  # random directions around the centre: no language's
    far = X.mean(0) + 50 * rng.standard_normal((5, X.shape[1])).astype(np.float32)
    assert set(lid.predict(far).codes) == {UNKNOWN}
    assert set(lid.predict(far).nearest) <= {"de", "zh", "en"}


def test_meaning_without_a_tag_uses_the_predicted_language(caplog):
    model = fitted("mean-centering")
    X, langs = _labelled()
    with caplog.at_level(logging.INFO, logger="disembed"):
        untagged = model.meaning(X)
    assert "mixture" in caplog.text and "confidence" in caplog.text
    predicted = model.predict_language(X).codes
    assert (predicted == UNKNOWN).any()  # a far training row: still a mixture of languages
    w = model.language_id_.route_weights(X)  # 'unknown' rows too: weighted by the posterior
    want = sum(w[:, [k]] * model.meaning(X, code)
               for k, code in enumerate(model.language_id_.languages_))
    np.testing.assert_allclose(untagged, want, atol=1e-6)
    tagged = model.meaning(X, langs)  # where the identifier is sure, near the tag's route
    cos = (untagged * tagged).sum(1) / np.linalg.norm(untagged, axis=1) / np.linalg.norm(
        tagged, axis=1)
    assert np.median(cos) > 0.9999 and cos.min() > 0.99
    mixed = [None if i % 2 else code for i, code in enumerate(langs)]
    np.testing.assert_allclose(model.meaning(X, mixed)[1::2], untagged[1::2], atol=1e-6)
    np.testing.assert_allclose(model.meaning(X, mixed)[::2], model.meaning(X, langs)[::2],
                               atol=1e-6)


def test_identifier_is_saved_with_the_model_and_loads_identical(tmp_path):
    model = fitted("seed-centered")
    X, _ = _labelled()
    loaded = load_disentangler(model.save(tmp_path / "m"))
    a, b = model.predict_language(X), loaded.predict_language(X)
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.confidence, b.confidence)
    np.testing.assert_array_equal(model.meaning(X), loaded.meaning(X))


def test_models_without_a_language_have_no_identifier():
    model = fitted("lsar")
    assert model.language_id_ is None
    with pytest.raises(ConfigError, match="uses no language"):
        model.predict_language(np.zeros((1, 16), np.float32))
    with pytest.raises(ConfigError, match="nothing to calibrate"):
        model.calibrate(np.zeros((3, 16), np.float32), "ja")


@pytest.mark.parametrize("name", ["mean-centering", "seed-centered", "lir"])
def test_calibrate_adds_a_language_that_survives_save_and_load(name, tmp_path):
    model = fitted(name)
    rng = np.random.default_rng(5)
    src, _, _ = toy_pairs()
    ja = src + 6 * rng.standard_normal(src.shape[1]).astype(np.float32)  # a new offset
    before = model.meaning(ja, "ja")
    model.calibrate(ja[:100], "jpn")
    assert "ja" in model.known_languages()
    after = model.meaning(ja[100:], "ja")
    assert not np.allclose(before[100:], after, atol=1e-3)
    if name == "mean-centering":  # its own mean now: centred rows average near zero
        assert np.abs(after.mean(0)).max() < np.abs(before.mean(0)).max()
    assert (model.predict_language(ja[100:]).codes == "ja").mean() > 0.9
    loaded = load_disentangler(model.save(tmp_path / "m"))
    np.testing.assert_array_equal(loaded.meaning(ja[100:], "ja"), after)
    np.testing.assert_array_equal(loaded.meaning(ja[100:]), model.meaning(ja[100:]))


def test_a_model_saved_before_issue_17_loads_and_says_what_it_lacks(tmp_path, caplog):
    import json

    model = fitted("mean-centering")
    path = model.save(tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    config["params"]["unknown_language"] = "batch"  # the removed transductive policy
    del config["learned"]["language_id"]
    config["state"] = {k: v for k, v in config["state"].items()
                       if not k.startswith("language_id.")}
    (path / "config.json").write_text(json.dumps(config))
    from safetensors.numpy import load_file, save_file

    state = {k: v for k, v in load_file(str(path / "model.safetensors")).items()
             if not k.startswith("language_id.")}
    save_file(state, str(path / "model.safetensors"))
    config["weights_sha256"] = __import__("hashlib").sha256(
        (path / "model.safetensors").read_bytes()).hexdigest()
    config.pop("config_sha256", None)  # as saved before config checksums existed
    (path / "config.json").write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING, logger="disembed"):
        old = load_disentangler(path)
    assert old.unknown_language == "global" and "'batch'" in caplog.text
    X, langs = _labelled()
    np.testing.assert_array_equal(old.meaning(X, langs), model.meaning(X, langs))
    with pytest.raises(ConfigError, match="older disembed"):
        old.meaning(X)


@pytest.mark.parametrize("route_map", ["softmax", "sparsemax"])
def test_route_weights_are_a_continuous_distribution(route_map):
    """Issue 31: the weights an untagged row mixes the routes with sum to 1, are row-wise,
    move little for a small move of the row (no jump at a tie), and are saved."""
    import copy

    X, langs = _labelled()
    lid = copy.deepcopy(fitted("mean-centering").language_id_)
    lid.route_map = route_map
    w = lid.route_weights(X)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert (w >= 0).all() and ((w == 0) | (w >= 1e-4)).all()
    np.testing.assert_array_equal(lid.route_weights(X[:7]), w[:7])
    # along the segment between a de and an en row: no step larger than a small multiple of
    # the step of the row itself (a hard argmax jumps by 1 at the tie)
    a, b = X[langs == "de"][0], X[langs == "en"][0]
    path = np.linspace(0, 1, 2001)[:, None] * (b - a) + a
    jumps = np.abs(np.diff(lid.route_weights(path.astype(np.float32)), axis=0)).max()
    assert jumps < 0.05, jumps
    again = LanguageIdentifier.from_saved(lid.config(), lid.state("p."), "p.")
    assert again.route_map == route_map


def test_sparsemax_is_the_projection_onto_the_simplex():
    from disembed.util.routing_rule import sparsemax

    z = np.array([[0.0, 0.0, -5.0], [2.0, 0.0, 0.0], [0.3, 0.0, 0.0], [1.0, 1.0, 1.0]])
    np.testing.assert_allclose(sparsemax(z), [[0.5, 0.5, 0], [1, 0, 0], [0.2 + 1 / 3, 1 / 3 - 0.1,
                                              1 / 3 - 0.1], [1 / 3] * 3], atol=1e-12)
    rng = np.random.default_rng(0)
    z = 3 * rng.standard_normal((200, 6))
    w = sparsemax(z)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    # the KKT conditions of the projection: w = max(z - tau, 0) with one tau per row
    for zi, wi in zip(z, w, strict=True):
        t = (zi - wi)[wi > 0]
        assert np.ptp(t) < 1e-9 and (zi[wi == 0] <= t[0] + 1e-9).all()
