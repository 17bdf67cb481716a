"""Every registered method: fits, transforms, saves, loads strictly, rejects misuse."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from disembed.exceptions import CheckpointError, NotFittedError, ShapeError
from disembed.methods import METHODS, NeuralDisentangler, load_disentangler, make_method

TRAINED = [n for n in METHODS.names() if issubclass(METHODS.get(n), NeuralDisentangler)]
FAST = {n: {"max_epochs": 2, "batch_size": 64} for n in TRAINED}


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
    # as an older model (no checksums): the keys and shapes are still checked
    del config["weights_sha256"], config["config_sha256"]
    (path / "config.json").write_text(json.dumps(config))
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


@pytest.mark.parametrize("name", TRAINED)
def test_trained_recipes_are_deterministic(name, toy_pairs):
    quick = {"max_epochs": 1, "batch_size": 64}
    a = make_method(name, **quick).fit(*toy_pairs, "en")
    b = make_method(name, **quick).fit(*toy_pairs, "en")
    for (k, v), (_, w) in zip(a.head_.state_dict().items(), b.head_.state_dict().items(),
                              strict=True):
        assert np.array_equal(v.numpy(), w.numpy()), k
    c = make_method(name, **quick, seed=1).fit(*toy_pairs, "en")
    assert not np.array_equal(a.meaning(toy_pairs[0][:5], "de"), c.meaning(toy_pairs[0][:5], "de"))


@pytest.mark.parametrize("name", TRAINED + ["oracle+seed", "oracle+intra"])
def test_loss_is_finite_and_every_head_parameter_gets_a_gradient(name, toy_pairs):
    import torch

    from disembed.training.batches import make_batch

    src, tgt, src_lang = toy_pairs
    model = make_method(name, max_epochs=1, batch_size=64).fit(src, tgt, src_lang, "en")
    ids = {lang: i for i, lang in enumerate(model.languages_)}
    s_ids = torch.tensor([ids[x] for x in src_lang[:64]])
    batch = make_batch(torch.tensor(src[:64]), torch.tensor(tgt[:64]), s_ids,
                       torch.full((64,), ids["en"]), torch.arange(64),
                       torch.Generator().manual_seed(0), "mask")
    model.head_.zero_grad()
    loss, terms = model.loss(model.head_, batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert set(terms) == set(model.term_weights())
    assert all(torch.isfinite(v) for v in terms.values())
    loss.backward()
    for key, p in model.head_.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, key


def test_composed_names_resolve_save_and_load(toy_pairs, tmp_path):
    from disembed.exceptions import UnknownNameError
    from disembed.methods import method_class

    assert method_class("meat+oracle") is method_class("oracle+meat")
    model = make_method("oracle+seed", max_epochs=1, batch_size=64, oracle_variant="official-new")
    model.fit(*toy_pairs, "en")
    model.save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["method"] == "oracle+seed"
    assert config["params"]["oracle_variant"] == "official-new"
    loaded = load_disentangler(tmp_path / "m")
    assert loaded.term_weights() == model.term_weights()
    np.testing.assert_allclose(loaded.meaning(toy_pairs[0][:5], "de"),
                               model.meaning(toy_pairs[0][:5], "de"), atol=1e-6)
    with pytest.raises(UnknownNameError, match="cannot compose ORACLE with 'baseline'"):
        make_method("oracle+baseline")


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
    assert make_method("mean-centering").unknown_language == "global"  # the default
    near = make_method("mean-centering", unknown_language="nearest").fit(src, tgt, src_lang,
                                                                          "en")
    # an unseen language is centred row by row with the identifier's mixture of the
    # training means, never with the rows of the call (one row alone would be centred to 0)
    out = near.meaning(src[:4], "fr")
    w = near.language_id_.route_weights(src[:4])
    want = src[:4] - w @ np.stack([near.means_[near.languages_.index(c)]
                                   for c in near.language_id_.languages_])
    np.testing.assert_allclose(out, want, atol=1e-6)
    assert np.linalg.norm(near.meaning(src[:1], "fr")) > 0.1
    glob = make_method("mean-centering").fit(src, tgt, src_lang, "en")  # global
    np.testing.assert_allclose(glob.meaning(src[:4], "fr"), src[:4] - glob.means_.mean(0),
                               atol=1e-6)
    with pytest.raises(ConfigError, match="unknown_language must be"):
        make_method("mean-centering", unknown_language="drop")
