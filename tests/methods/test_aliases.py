"""ORACLE as a hyperparameter, names that switch hyperparameters on, and old saved models."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from disembed.exceptions import ConfigError, UnknownNameError
from disembed.methods import (
    METHODS,
    Dream,
    Meat,
    NeuralDisentangler,
    Oracle,
    Seed,
    load_disentangler,
    make_method,
    method_class,
)
from disembed.methods.aliases import ALIASES
from disembed.methods.constraints import add_weights
from disembed.methods.meat import MEAT_WEIGHTS
from disembed.methods.oracle_variants import ORACLE_VARIANTS, oracle_weights


def test_aliases_resolve_to_the_recipe_class_with_params():
    assert method_class("oracle+meat") is Meat and method_class("meat+oracle") is Meat
    assert method_class("oracle+dream") is Dream and method_class("seed-centered") is Seed
    assert method_class("oracle+seed") is Seed  # composed on demand, no class generated
    model = make_method("oracle+meat")
    assert type(model) is Meat and model.oracle_variant == "paper" and model.oracle_weight == 1.0
    assert model.term_weights() == add_weights(MEAT_WEIGHTS, ORACLE_VARIANTS["paper"])
    assert make_method("meat").oracle_variant is None
    assert make_method("meat").term_weights() == MEAT_WEIGHTS
    assert make_method("seed-centered").center == "language"


def test_every_registered_alias_is_listed_and_names_itself():
    for name in ALIASES:
        assert name in METHODS.names()
        assert make_method(name).name == name


@pytest.mark.parametrize("name", METHODS.names() + ["oracle+seed", "dream+oracle", "meat-centered",
                                                    "oracle+dream-centered", "oracle-centered"])
def test_name_and_params_rebuild_the_same_method(name):
    model = make_method(name)
    again = make_method(model.name, **model.get_params())
    assert type(again) is type(model) and again.get_params() == model.get_params()
    assert again.name == model.name


def test_an_alias_switch_may_change_but_not_turn_off():
    model = make_method("oracle+meat", oracle_variant="official-new", oracle_weight=0.5)
    assert model.oracle_variant == "official-new"
    assert model.term_weights() == add_weights(
        MEAT_WEIGHTS, oracle_weights("official-new", 0.5))
    with pytest.raises(ConfigError, match="turns it off"):
        make_method("oracle+meat", oracle_variant=None)
    with pytest.raises(ConfigError, match="turns it off"):
        make_method("seed-centered", center="none")


def test_oracle_hyperparameters_are_plain_init_params():
    for cls in (Seed, Dream, Meat, Oracle):
        names = cls.param_names()
        assert {"oracle_variant", "oracle_weight", "center", "unknown_language", "max_steps",
                "time_budget_seconds"} <= set(names)
    assert make_method("dream", oracle_variant="official-old").get_params()[
        "oracle_variant"] == "official-old"
    with pytest.raises(ConfigError, match="oracle_variant must be one of"):
        make_method("seed", oracle_variant="nope")


def test_oracle_alone_has_only_oracle_terms_and_needs_a_variant():
    assert make_method("oracle").term_weights() == oracle_weights("paper")
    assert make_method("oracle", oracle_variant="official-main").term_weights() == {
        "orthogonality": 0.5}
    with pytest.raises(ConfigError, match="oracle_variant must be one of"):
        make_method("oracle", oracle_variant=None)


@pytest.mark.parametrize("name", ["oracle+baseline", "oracle+oracle", "oracle+oracle+meat",
                                  "oracle+oracle+seed", "mean-centering-centered",
                                  "seed-centered-centered"])
def test_impossible_compositions_are_clear_errors(name):
    with pytest.raises(UnknownNameError):
        make_method(name)


def test_unknown_names_still_suggest():
    with pytest.raises(UnknownNameError, match="Did you mean 'meat'"):
        make_method("meet")


def old_format_config(model, method, params):
    """config.json as disembed wrote it when oracle+<recipe> was a generated class."""
    state = {k: list(v.shape) for k, v in model._state().items()}
    return {"format_version": 1, "method": method, "params": params, "dim": 16, "state": state,
            "learned": {"languages": model.languages_,
                        "training": {"best_epoch": 1, "epochs": 1, "stopped_early": False,
                                     "train_pairs": 540, "val_pairs": 60,
                                     "best_val_loss": 1.0}},
            "metadata": {"encoder": "toy"}}


OLD_TWO_HEAD_PARAMS = {"lr": 0.0001, "batch_size": 64, "max_epochs": 100, "patience": 5,
                       "val_fraction": 0.1, "seed": 0, "negatives": "paper", "hidden": 0}


@pytest.mark.parametrize("method, extra", [
    ("oracle+meat", {"oracle_variant": "official-new", "oracle_weight": 0.5}),
    ("oracle+dream", {"oracle_variant": "paper", "oracle_weight": 1.0}),
    ("oracle", {"oracle_variant": "paper", "oracle_weight": 1.0}),
    ("meat", {}),
])
def test_models_saved_in_the_old_format_still_load(method, extra, toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    fitted = make_method(method, max_epochs=1, batch_size=64, **extra).fit(src, tgt, src_lang,
                                                                           "en")
    directory = tmp_path / "old"
    directory.mkdir()
    save_file({k: np.ascontiguousarray(v) for k, v in fitted._state().items()},
              str(directory / "model.safetensors"))
    config = old_format_config(fitted, method, {**OLD_TWO_HEAD_PARAMS, **extra})
    (directory / "config.json").write_text(json.dumps(config))
    loaded = load_disentangler(directory)
    assert isinstance(loaded, NeuralDisentangler) and loaded.name == method
    assert loaded.max_epochs == 100 and loaded.center == "none"
    for key, value in extra.items():
        assert getattr(loaded, key) == value
    assert loaded.term_weights() == fitted.term_weights()
    X = src[:7]
    np.testing.assert_array_equal(loaded.meaning(X, "de"), fitted.meaning(X, "de"))
    np.testing.assert_array_equal(loaded.language(X, "de"), fitted.language(X, "de"))


def test_saved_composed_model_writes_its_name_and_loads(toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    model = make_method("oracle+meat-centered", max_epochs=1, batch_size=64).fit(
        src, tgt, src_lang, "en")
    model.save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["method"] == "oracle+meat-centered"
    assert config["params"]["oracle_variant"] == "paper"
    assert config["params"]["center"] == "language"
    loaded = load_disentangler(tmp_path / "m")
    assert type(loaded) is Meat and loaded.get_params() == model.get_params()
