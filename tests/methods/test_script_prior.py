"""The script prior: an untagged row whose text is known (its ``und-<Script>`` tag) mixes
only the routes of the training languages that write its script."""

import copy

import numpy as np
import pytest
from recipe_contract import fitted, toy_pairs

from disembed.experiment.steps import with_untagged, without_tags
from disembed.methods import METHODS
from disembed.methods.routing import tags_with_scripts


@pytest.fixture(scope="module")
def model():
    return fitted("mean-centering")  # de, zh and en: Latin, Han, Latin


def _between(n=12):
    """Rows halfway between a de and a zh row: the identifier splits them (no tag)."""
    src, _, lang = toy_pairs()
    return (0.5 * src[lang == "de"][:n] + 0.5 * src[lang == "zh"][:n]).astype(np.float32)


def test_a_han_row_takes_the_only_han_languages_route(model):
    X = _between()
    w = model.language_id_.route_weights(X)
    zh = model.language_id_.languages_.index("zh")
    assert (w[:, zh] < 0.9).all() and (w[:, zh] > 0.1).any()  # the identifier is torn
    np.testing.assert_allclose(model.meaning(X, "und-Hani"), model.meaning(X, "zh"),
                               atol=1e-6)
    for tag in ("und-Hans", "und-Hant", "und-Jpan", "und-Kore"):  # they stand for Han too
        np.testing.assert_array_equal(model.meaning(X, tag), model.meaning(X, "und-Hani"))


def test_a_latin_row_mixes_the_latin_languages_alone(model):
    X = _between()
    lid = model.language_id_
    allowed = lid.allowed_for_scripts(["Latn"] * len(X))
    assert allowed[0].tolist() == [code != "zh" for code in lid.languages_]
    w = lid.route_weights(X, allowed)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    assert (w[:, lid.languages_.index("zh")] == 0).all()
    want = sum(w[:, [k]] * model.meaning(X, code) for k, code in enumerate(lid.languages_))
    got = model.meaning(X, "und-Latn")
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.abs(got - model.meaning(X, None)).max() > 1e-2  # the mask moved them


def test_a_script_no_training_language_writes_keeps_the_whole_posterior(model):
    X = _between()
    for tag in ("und-Grek", "und-Zzzz", "und-Thai"):
        np.testing.assert_array_equal(model.meaning(X, tag), model.meaning(X, None))


def test_the_masked_weights_are_continuous_in_the_embedding(model):
    """The mask is the text's: along a path between two rows the weights move smoothly."""
    lid = copy.deepcopy(model.language_id_)
    src, _, lang = toy_pairs()
    a, b = src[lang == "de"][0], src[lang == "zh"][0]
    path = (np.linspace(0, 1, 2001)[:, None] * (b - a) + a).astype(np.float32)
    for route_map in ("softmax", "sparsemax"):
        lid.route_map = route_map
        w = lid.route_weights(path, lid.allowed_for_scripts(["Latn"] * len(path)))
        assert np.abs(np.diff(w, axis=0)).max() < 0.05, route_map
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(METHODS.names()))
def test_every_recipe_takes_script_tags_row_by_row(name):
    """A recipe without a language ignores the script; one with routes gives each row the
    vector it gets alone."""
    m = fitted(name)
    X = _between(6)
    tags = ["und-Hani", None, "de", "und-Latn", "und-Grek", "zh"]
    whole = m.meaning(X, tags)
    for i in range(len(X)):
        np.testing.assert_allclose(m.meaning(X[i:i + 1], tags[i]), whole[i:i + 1],
                                   atol=1e-6 * max(1.0, float(np.abs(whole[i]).max())))
    if not m.uses_language:
        np.testing.assert_array_equal(whole, m.meaning(X, None))


def test_every_surface_helper_sends_the_texts_script():
    assert tags_with_scripts(["你好", "Hallo", "123"]) == ["und-Hani", "und-Latn", None]
    assert tags_with_scripts(["你好", "Hallo"], "de") == ["de", "de"]
    assert tags_with_scripts(["你好", "Hallo"], ["und", "fr"]) == ["und-Hani", "fr"]


def test_evaluate_views_route_untagged_rows_by_their_texts_script(model):
    X = _between(4)
    texts = ["火车", "Zug", "火车", "Zug"]
    want = model.meaning(X, ["und-Hani", "und-Latn", "und-Hani", "und-Latn"])
    np.testing.assert_array_equal(with_untagged(model)(X, "de", texts=texts)["untagged"],
                                  want)
    np.testing.assert_array_equal(without_tags(model)(X, "de", texts=texts)["meaning"], want)
    # without the texts (a caller of the old two-argument form): the whole posterior
    np.testing.assert_array_equal(with_untagged(model)(X, "de")["untagged"],
                                  model.meaning(X, None))
