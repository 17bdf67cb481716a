"""Where the script prior is unsure it gives way to the whole posterior (issue 46, point 6):
an untagged text in a language the model never saw is routed as the identifier sees it,
not forced among the training languages that share its script."""

import copy

import numpy as np
import pytest
from recipe_contract import fitted, toy_pairs

from disembed.exceptions import CheckpointError, ConfigError
from disembed.methods.language_id import LanguageIdentifier
from disembed.util import routing_rule as rule

LANGS = ["de", "en", "zh"]
LATIN = np.array([[True, True, False]])


def _weights(scores, confidence=rule.PRIOR_CONFIDENCE, mask=LATIN):
    scores = np.atleast_2d(np.asarray(scores, np.float64))
    return rule.route_weights(scores, 1.0, "softmax", 0.0,
                              np.repeat(mask, len(scores), axis=0), confidence)


def _softmax(z):
    e = np.exp(np.asarray(z, np.float64) - np.max(z))
    return e / e.sum()


def test_the_share_ramps_from_lo_to_hi():
    restricted = np.array([[0.95, 0.05], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.5, 0.5]])
    np.testing.assert_allclose(rule.prior_share(restricted, (0.7, 0.9)),
                               [1.0, 1.0, 0.5, 0.0, 0.0], atol=1e-12)
    np.testing.assert_array_equal(rule.prior_share(restricted, None), np.ones(5))


def test_a_sure_prior_is_kept_whole_and_an_unsure_one_gives_way():
    """de/en torn (0.5/0.5) while the whole posterior leans on zh: the whole posterior; de
    sure among the Latin languages: the prior as before; between: half of each."""
    torn = [0.0, 0.0, 3.0]
    np.testing.assert_allclose(_weights(torn)[0], _softmax(torn), atol=1e-12)
    np.testing.assert_allclose(_weights(torn, confidence=None)[0], [0.5, 0.5, 0.0],
                               atol=1e-12)
    sure = [np.log(19.0), 0.0, 3.0]  # restricted: 0.95 / 0.05
    np.testing.assert_allclose(_weights(sure)[0], [0.95, 0.05, 0.0], atol=1e-12)
    half = [np.log(4.0), 0.0, 3.0]  # restricted: 0.8 / 0.2, halfway up the ramp
    want = 0.5 * np.array([0.8, 0.2, 0.0]) + 0.5 * _softmax(half)
    np.testing.assert_allclose(_weights(half)[0], want, atol=1e-12)


def test_a_row_without_a_mask_and_a_one_writer_script_are_unchanged():
    z = np.array([[0.3, 0.1, 2.0]])
    np.testing.assert_allclose(_weights(z, mask=np.ones((1, 3), bool)),
                               rule.route_weights(z, 1.0, "softmax", 0.0), atol=1e-15)
    han = np.array([[False, False, True]])  # one language writes it: one-hot, always sure
    np.testing.assert_array_equal(_weights([2.0, 2.0, -5.0], mask=han)[0], [0, 0, 1.0])


@pytest.mark.parametrize("route_map", rule.ROUTE_MAPS)
def test_the_weights_stay_continuous_across_the_ramp(route_map):
    """Along a path from a torn to a sure Latin row the weights move smoothly (no jump where
    the prior starts or stops giving way), each row on its own."""
    t = np.linspace(0.0, np.log(40.0), 4001)
    scores = np.stack([t, np.zeros_like(t), np.full_like(t, 3.0)], axis=1)
    mask = np.repeat(LATIN, len(t), axis=0)
    w = rule.route_weights(scores, 1.0, route_map, 0.0, mask, rule.PRIOR_CONFIDENCE)
    assert np.abs(np.diff(w, axis=0)).max() < 5e-3
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    for i in (0, 1234, 4000):
        np.testing.assert_array_equal(
            rule.route_weights(scores[i:i + 1], 1.0, route_map, 0.0, mask[i:i + 1],
                               rule.PRIOR_CONFIDENCE)[0], w[i])


@pytest.fixture(scope="module")
def model():
    return fitted("mean-centering")  # de, zh and en


def _torn_latin_rows(model):
    """Blends of de, en and zh rows where the identifier's posterior restricted to the Latin
    languages is torn (top weight under the ramp's low end) and zh takes a tenth of the
    whole posterior: rows the prior used to force among de and en."""
    src, tgt, lang = toy_pairs()
    D, E, Z = src[lang == "de"][:8], tgt[:8], src[lang == "zh"][:8]
    X = np.concatenate([a * D + (1 - a - c) * E + c * Z
                        for a in np.linspace(0.1, 0.5, 9) for c in np.linspace(0.1, 0.5, 9)
                        if a + c < 0.95]).astype(np.float32)
    lid = model.language_id_
    old = copy.deepcopy(lid)
    old.prior_confidence = None
    restricted = old.route_weights(X, lid.allowed_for_scripts(["Latn"] * len(X)))
    whole = lid.route_weights(X)
    keep = (restricted.max(axis=1) < rule.PRIOR_CONFIDENCE[0]) & (
        whole[:, lid.languages_.index("zh")] > 0.1)
    assert keep.sum() >= 3, "the toy data no longer gives torn Latin rows"
    return X[keep], whole[keep]


def test_the_models_meaning_follows_the_rule(model):
    X, whole = _torn_latin_rows(model)
    lid = model.language_id_
    assert lid.prior_confidence == rule.PRIOR_CONFIDENCE
    w = lid.route_weights(X, lid.allowed_for_scripts(["Latn"] * len(X)))
    zh = lid.languages_.index("zh")
    np.testing.assert_allclose(w, whole, atol=1e-12)  # the prior gave way wholly
    want = sum(w[:, [k]] * model.meaning(X, code) for k, code in enumerate(lid.languages_))
    np.testing.assert_allclose(model.meaning(X, "und-Latn"), want, atol=1e-5)
    old = copy.deepcopy(model)
    old.language_id_.prior_confidence = None  # a model saved before: the prior whole
    w_old = old.language_id_.route_weights(X, lid.allowed_for_scripts(["Latn"] * len(X)))
    assert (w_old[:, zh] == 0).all()
    assert np.abs(old.meaning(X, "und-Latn") - model.meaning(X, "und-Latn")).max() > 1e-2


def test_saved_with_the_model_and_an_older_save_keeps_the_prior_whole(model):
    lid = model.language_id_
    state = lid.state("lid.")
    assert lid.config()["prior_confidence"] == list(rule.PRIOR_CONFIDENCE)
    assert LanguageIdentifier.from_saved(lid.config(), state, "lid.").prior_confidence == \
        rule.PRIOR_CONFIDENCE
    older = {k: v for k, v in lid.config().items() if k != "prior_confidence"}
    assert LanguageIdentifier.from_saved(older, state, "lid.").prior_confidence is None
    with pytest.raises(CheckpointError, match="prior_confidence must be two probabilities"):
        LanguageIdentifier.from_saved({**lid.config(), "prior_confidence": [0.9]}, state,
                                      "lid.")


@pytest.mark.parametrize("bad", [(0.9, 0.7), (0.5, 1.5), (-0.1, 0.5), "high", (0.5,)])
def test_a_bad_confidence_says_what_is_expected(bad):
    with pytest.raises(ConfigError, match=r"0 <= lo < hi <= 1"):
        LanguageIdentifier(prior_confidence=bad)
