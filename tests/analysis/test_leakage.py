"""The language-ID probe: separates separable data, sits at chance on noise, is seeded."""

import numpy as np
import pytest

from disembed.analysis.leakage import language_id_probe, probe_views, stratified_split
from disembed.exceptions import ConfigError, ShapeError


def _data(separation, seed=0, n=300, d=8):
    rng = np.random.default_rng(seed)
    langs = np.array(["de", "zh", "en"] * (n // 3), dtype=object)
    centres = {x: separation * rng.standard_normal(d) for x in ("de", "zh", "en")}
    X = rng.standard_normal((n, d)) + np.stack([centres[x] for x in langs])
    return X, langs


def test_probe_separates_separable_data():
    X, langs = _data(separation=5.0)
    res = language_id_probe(X, langs)
    assert res.accuracy > 0.95
    assert res.chance == pytest.approx(1 / 3, abs=0.02)
    assert res.n_train + res.n_test == len(X) and res.n_test == 90
    assert set(res.per_language) == {"de", "zh", "en"}


def test_probe_is_at_chance_on_noise():
    X, langs = _data(separation=0.0, n=600)
    res = language_id_probe(X, langs)
    assert abs(res.accuracy - 1 / 3) < 0.1


def test_probe_is_seeded():
    X, langs = _data(separation=0.5)
    assert language_id_probe(X, langs, seed=3) == language_id_probe(X, langs, seed=3)


def test_split_is_stratified_and_disjoint():
    labels = np.array(["a"] * 10 + ["b"] * 20, dtype=object)
    train, test = stratified_split(labels, 0.3, seed=0)
    assert not set(train) & set(test) and len(train) + len(test) == 30
    assert (labels[test] == "a").sum() == 3 and (labels[test] == "b").sum() == 6


def test_probe_views_and_errors():
    X, langs = _data(separation=5.0)
    out = probe_views({"meaning": np.zeros_like(X), "language": X}, langs)
    assert out["language"].accuracy > 0.95 and out["meaning"].accuracy < 0.5
    with pytest.raises(ConfigError, match=">= 2 languages"):
        language_id_probe(X, ["de"] * len(X))
    with pytest.raises(ShapeError):
        language_id_probe(X, langs[:-1])


def test_lid_sample_english_is_not_a_translation_of_probe_sentences(tiny_data_dir):
    from disembed.analysis.samples import lid_sample, tatoeba_pairs

    texts, labels = lid_sample(["de", "zh"], 2, data_dir=tiny_data_dir)
    assert labels.count("de") == 2 and labels.count("zh") == 2 and 1 <= labels.count("en") <= 2
    pairs = tatoeba_pairs(["de", "zh"], 100, data_dir=tiny_data_dir)
    translation = dict(zip(pairs.src, pairs.tgt, strict=True))
    probed = [t for t, lang in zip(texts, labels, strict=True) if lang != "en"]
    english = [t for t, lang in zip(texts, labels, strict=True) if lang == "en"]
    assert not {translation[t] for t in probed} & set(english) - set(probed)
