"""The routing error's erasure (issue 31, point 2; :mod:`disembed.methods.route_erasure`):
every meaning vector of mean-centering and seed-centered is projected off the top principal
directions of the differences between the language routes."""

import numpy as np
import pytest

from disembed.methods import load_disentangler, make_method
from disembed.methods.export_map import apply_map
from disembed.methods.route_erasure import (
    ROUTE_ERASURE_RANK,
    STATE_KEY,
    erase,
    fit_route_erasure,
)

LANGS = ("de", "zh", "fr", "ar", "ru", "ja", "ko")  # seven + English: rank 4 < L - 1 = 7


@pytest.fixture(scope="module")
def many_languages():
    """Shared meaning plus a per-language offset, eight languages (English the target)."""
    rng = np.random.default_rng(1)
    n, d = 700, 16
    meaning = rng.standard_normal((n, d))
    offsets = {x: 2 * rng.standard_normal(d) for x in (*LANGS, "en")}
    src_lang = np.array([LANGS[i % len(LANGS)] for i in range(n)], dtype=object)
    src = meaning + np.stack([offsets[x] for x in src_lang]) + 0.1 * rng.standard_normal((n, d))
    tgt = meaning + offsets["en"] + 0.1 * rng.standard_normal((n, d))
    return src.astype(np.float32), tgt.astype(np.float32), src_lang


@pytest.fixture(scope="module")
def centring(many_languages):
    src, tgt, src_lang = many_languages
    return make_method("mean-centering").fit(src, tgt, src_lang, "en")


def principal_directions(means: np.ndarray, rank: int) -> np.ndarray:
    """Brute force: the top eigenvectors of the scatter of the centred means."""
    c = means.astype(np.float64) - means.mean(axis=0)
    vals, vecs = np.linalg.eigh(c.T @ c)
    return vecs[:, np.argsort(vals)[::-1][:rank]]


def test_the_erased_directions_are_the_top_principal_directions_of_the_means(centring):
    Q = centring.route_erasure_
    assert Q.shape == (16, ROUTE_ERASURE_RANK) and Q.dtype == np.float32
    np.testing.assert_allclose(Q.T @ Q, np.eye(ROUTE_ERASURE_RANK), atol=1e-5)
    want = principal_directions(centring.means_, ROUTE_ERASURE_RANK)
    np.testing.assert_allclose(Q @ Q.T, want @ want.T, atol=1e-4)  # the same subspace


def test_every_row_is_projected_and_the_language_part_keeps_the_rest(centring,
                                                                    many_languages):
    X = many_languages[0][:20]
    Q = centring.route_erasure_.astype(np.float64)
    P = np.eye(16) - Q @ Q.T
    for lang in ("de", "ja", "en", "sw"):  # trained, trained, target, unseen (global mean)
        mu = centring.means_[centring.languages_.index(lang)] if lang != "sw" else \
            centring.means_.mean(axis=0)
        np.testing.assert_allclose(centring.meaning(X, lang), (X - mu) @ P, atol=1e-5)
        views = centring.views(X, lang)
        np.testing.assert_allclose(views["meaning"], centring.meaning(X, lang), atol=1e-6)
        np.testing.assert_allclose(views["meaning"] + views["language"], X, atol=1e-5)
        np.testing.assert_allclose(centring.language(X, lang), views["language"], atol=1e-6)


def test_the_untagged_error_loses_the_erased_share(centring, many_languages):
    """An untagged row's error against its own tag's route, with and without the erasure:
    the erased part of the error is gone, the rest is unchanged."""
    X, langs = many_languages[0][:200], many_languages[2][:200]
    erased = centring.meaning(X) - centring.meaning(X, list(langs))
    raw = centring.__class__.__new__(centring.__class__)
    raw.__dict__.update(centring.__dict__, route_erasure_=None)
    error = raw.meaning(X) - raw.meaning(X, list(langs))
    np.testing.assert_allclose(erased, erase(error, centring.route_erasure_), atol=1e-5)
    assert np.abs(erased @ centring.route_erasure_).max() < 1e-5


def test_at_full_rank_the_untagged_meaning_does_not_depend_on_the_weights(centring,
                                                                         many_languages):
    X = many_languages[0][:30]
    full = centring.__class__.__new__(centring.__class__)
    full.__dict__.update(centring.__dict__, route_erasure_=None)
    full.route_erasure_ = fit_route_erasure(full, rank=len(centring.languages_) - 1)
    tagged = [full.meaning(X, lang) for lang in centring.languages_]
    for other in tagged[1:]:
        np.testing.assert_allclose(other, tagged[0], atol=1e-5)
    np.testing.assert_allclose(full.meaning(X), tagged[0], atol=1e-5)


def test_seed_centered_erases_after_its_linear_head(many_languages):
    src, tgt, src_lang = many_languages
    model = make_method("seed-centered", max_epochs=2, batch_size=64).fit(src, tgt, src_lang,
                                                                          "en")
    Q = model.route_erasure_
    assert Q is not None and Q.shape == (16, ROUTE_ERASURE_RANK)
    X = src[:10]
    offsets = np.stack([model.meaning(np.zeros((1, 16), np.float32), x)[0]
                        for x in model.language_id_.languages_])
    assert np.abs(offsets @ Q - (offsets @ Q).mean(axis=0)).max() < 1e-4  # nothing left in D
    mmap = model.meaning_map()
    for lang in ("de", "ko", "en"):
        np.testing.assert_allclose(apply_map(mmap, X, lang), model.meaning(X, lang), atol=1e-4)
        views = model.views(X, lang)  # SEED's own views: erased as meaning, m + l = e kept
        np.testing.assert_allclose(views["meaning"], model.meaning(X, lang), atol=1e-6)
        np.testing.assert_allclose(views["meaning"] + views["language"], X, atol=1e-5)
        np.testing.assert_allclose(model.language(X, lang), views["language"], atol=1e-6)


@pytest.mark.parametrize("name", ["lir", "linear-map", "whitening", "seed"])
def test_recipes_it_was_not_chosen_for_erase_nothing(name, many_languages):
    src, tgt, src_lang = many_languages
    params = {"max_epochs": 1} if name == "seed" else {}
    assert make_method(name, **params).fit(src, tgt, src_lang, "en").route_erasure_ is None


def test_routes_that_differ_by_more_than_an_offset_get_none(centring):
    """The erasure is defined where the error lies in one fixed subspace; a model whose
    routes differ by an x-dependent amount (a per-language linear map) gets none."""
    model = centring.__class__.__new__(centring.__class__)
    model.__dict__.update(centring.__dict__, route_erasure_=None)
    scale = {lang: 1.0 + 0.5 * i for i, lang in enumerate(model.languages_)}
    base = type(model).meaning.__wrapped__

    def scaled(self, X, code):
        return base(self, X, code) * scale.get(code, 1.0)

    model.meaning = lambda X, code=None: scaled(model, X, code)
    assert fit_route_erasure(model) is None


def test_saved_with_the_model_and_an_older_model_loads_without_it(centring, many_languages,
                                                                  tmp_path):
    X = many_languages[0][:10]
    path = centring.save(tmp_path / "m")
    loaded = load_disentangler(path)
    np.testing.assert_array_equal(loaded.route_erasure_, centring.route_erasure_)
    np.testing.assert_array_equal(loaded.meaning(X), centring.meaning(X))
    state, learned = centring.saved_state()
    assert STATE_KEY in state
    old = make_method("mean-centering")
    old.dim_ = 16
    old.restore({k: v for k, v in state.items() if k != STATE_KEY}, learned)
    assert old.route_erasure_ is None  # saved before the erasure existed: unchanged
    np.testing.assert_allclose(old.meaning(X, "de"),
                               X - centring.means_[centring.languages_.index("de")], atol=1e-6)
