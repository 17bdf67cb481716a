"""Every registered method: fits, transforms, saves, loads strictly, rejects misuse."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from disembed.exceptions import CheckpointError, NotFittedError, ShapeError
from disembed.methods import METHODS, load_disentangler, make_method

FAST = {"seed": {"max_epochs": 2, "batch_size": 64}}


def _fitted(name, toy_pairs):
    src, tgt, src_lang = toy_pairs
    return make_method(name, **FAST.get(name, {})).fit(src, tgt, src_lang, "en")


@pytest.mark.parametrize("name", METHODS.names())
def test_fit_transform_shapes(name, toy_pairs):
    model = _fitted(name, toy_pairs)
    X = toy_pairs[0][:10]
    views = model.views(X, "de")
    assert views["meaning"].shape == (10, 16) and views["meaning"].dtype == np.float32
    assert np.isfinite(views["meaning"]).all()
    assert ("language" in views) == model.has_language


@pytest.mark.parametrize("name", METHODS.names())
def test_save_load_round_trip(name, toy_pairs, tmp_path):
    model = _fitted(name, toy_pairs)
    model.save(tmp_path / "m", metadata={"encoder": "toy"})
    loaded = load_disentangler(tmp_path / "m")
    X = toy_pairs[0][:20]
    np.testing.assert_allclose(loaded.meaning(X, "de"), model.meaning(X, "de"), atol=1e-6)
    assert loaded.metadata_["encoder"] == "toy"


@pytest.mark.parametrize("name", METHODS.names())
def test_unfitted_and_wrong_dimension_errors(name, toy_pairs):
    with pytest.raises(NotFittedError, match="not fitted"):
        make_method(name).meaning(np.zeros((2, 16), np.float32), "de")
    model = _fitted(name, toy_pairs)
    with pytest.raises(ShapeError, match="has 8 features, but this .* expects 16"):
        model.meaning(np.zeros((2, 8), np.float32), "de")


def test_strict_load_rejects_missing_key_and_wrong_shape(toy_pairs, tmp_path):
    model = _fitted("seed", toy_pairs)
    path = model.save(tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    save_file({"meaning.weight": np.zeros((16, 16), np.float32)}, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"missing keys \['meaning.bias'\]"):
        load_disentangler(path)
    save_file({"meaning.weight": np.zeros((16, 8), np.float32),
               "meaning.bias": np.zeros(16, np.float32)}, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="wrong shapes"):
        load_disentangler(path)
    config["state"]["meaning.weight"] = [16, 8]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="do not fit a seed head of dimension 16"):
        load_disentangler(path)


def test_load_names_missing_files(tmp_path):
    with pytest.raises(CheckpointError, match="config.json is missing"):
        load_disentangler(tmp_path)


def test_seed_is_deterministic(toy_pairs):
    a = _fitted("seed", toy_pairs)
    b = _fitted("seed", toy_pairs)
    for (k, v), (_, w) in zip(a.head_.state_dict().items(), b.head_.state_dict().items()):
        assert np.array_equal(v.numpy(), w.numpy()), k


def test_seed_learns_to_remove_language(toy_pairs):
    """On data = meaning + language offset, SEED's meaning part must align translations better."""
    src, tgt, src_lang = toy_pairs
    model = make_method("seed", max_epochs=40, batch_size=128, lr=3e-3).fit(
        src, tgt, src_lang, "en")

    def pair_cos(a, b):
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return float((a * b).sum(1).mean())

    before = pair_cos(src, tgt)
    after = pair_cos(model.meaning(src, src_lang), model.meaning(tgt, "en"))
    assert after > before + 0.1
    assert model.history_.epochs[-1]["val_loss"] < model.history_.epochs[0]["val_loss"]


def test_mean_centering_unknown_language_policy(toy_pairs):
    from disembed.exceptions import ConfigError

    src, tgt, src_lang = toy_pairs
    strict = make_method("mean-centering", unknown_language="error").fit(src, tgt, src_lang, "en")
    with pytest.raises(ConfigError, match="no mean for language 'fr'"):
        strict.meaning(src[:3], "fr")
    batch = make_method("mean-centering").fit(src, tgt, src_lang, "en")
    out = batch.meaning(src[:4], "fr")
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-5)
    with pytest.raises(ConfigError, match="unknown_language must be"):
        make_method("mean-centering", unknown_language="drop")
