"""The contract every registered recipe passes (pykeen's ``MetaTestCase`` style): it
declares what it needs, and is saved, loaded, served, exported and tuned through the
library's own paths, which ask the recipe and never match its class or name.

``check_recipe(name, ...)`` runs every clause on a recipe registered under ``name`` and
raises ``AssertionError`` naming the clause that failed; ``test_plugin_contract.py`` runs
it over the whole registry and on a toy recipe registered by the test (the worked example
of CONTRIBUTING.md).
"""

from __future__ import annotations

import numpy as np

from disembed.encoders import HashEncoder
from disembed.experiment import TrainingData, Workspace
from disembed.experiment.tune import TuneConfig, tune
from disembed.methods import (
    Disentangler,
    NeuralDisentangler,
    apply_map,
    make_method,
    method_class,
    tuning_grid,
)
from disembed.serving.loading import load_service

#: what makes a trained recipe's toy fit fast
FAST = {"max_epochs": 2, "batch_size": 64}
DIM = 16


def fast_params(name: str) -> dict:
    return dict(FAST) if issubclass(method_class(name), NeuralDisentangler) else {}


def toy_pairs(n: int = 240, seed: int = 0):
    """Embeddings ``(n, 16)`` of de/zh sentences and their English translations: a shared
    meaning plus a per-language offset."""
    rng = np.random.default_rng(seed)
    meaning = rng.standard_normal((n, DIM))
    offsets = {lang: 3 * rng.standard_normal(DIM) for lang in ("de", "zh", "en")}
    src_lang = np.array(["de", "zh"] * (n // 2), dtype=object)
    src = meaning + np.stack([offsets[x] for x in src_lang]) + 0.1 * rng.standard_normal(
        (n, DIM))
    tgt = meaning + offsets["en"] + 0.1 * rng.standard_normal((n, DIM))
    return src.astype(np.float32), tgt.astype(np.float32), src_lang


def check_declarations(name: str) -> None:
    """``uses_language`` declared by the recipe itself (not inherited from the base), a
    tuning grid over hyperparameters it takes."""
    cls = method_class(name)
    owners = [c for c in cls.__mro__ if "uses_language" in vars(c)]
    assert owners and owners[0] is not Disentangler, (
        f"{name}: {cls.__name__} must declare uses_language (does its meaning part depend "
        "on the language of each row?)")
    grid = tuning_grid(name)
    unknown = set(grid) - set(cls.param_names())
    assert not unknown, f"{name}: hpo_default names {unknown}, which __init__ does not take"
    assert all(isinstance(v, list) and v for v in grid.values()), (
        f"{name}: every hpo_default entry must be a non-empty list of values")


def fitted(name: str, **params) -> Disentangler:
    src, tgt, src_lang = toy_pairs()
    return make_method(name, **{**fast_params(name), **params}).fit(src, tgt, src_lang, "en")


def check_save_load(model: Disentangler, tmp_path) -> None:
    """Saved and served from its folder (the service asks ``uses_language``)."""
    enc = HashEncoder(DIM)
    model.save(tmp_path / "model", metadata={"encoder": enc.identity.to_dict(),
                                              "encoder_spec": f"hash:{DIM}"})
    service = load_service(tmp_path / "model", use_cache=False)
    X = toy_pairs()[0][:12]
    for lang in ("de", "en"):
        np.testing.assert_allclose(service.model.meaning(X, lang), model.meaning(X, lang),
                                   atol=1e-6, err_msg=f"{model.name}: load changed meaning")
    assert service.needs_language == model.uses_language
    if not model.uses_language:
        langs = service.languages_for(len(X), None, "language")  # no language asked
        np.testing.assert_allclose(service.view(X, "meaning", langs), model.meaning(X, "de"),
                                   atol=1e-6, err_msg=f"{model.name} declares uses_language="
                                   "False, but its meaning part depends on the language")


def check_language_declaration_is_true(model: Disentangler) -> None:
    """A recipe that says it uses the language gives different meaning parts for two."""
    X = toy_pairs()[0][:12]
    differs = not np.allclose(model.meaning(X, "de"), model.meaning(X, "en"), atol=1e-5)
    assert differs == model.uses_language, (
        f"{model.name}: uses_language={model.uses_language}, but meaning(X, 'de') "
        f"{'differs from' if differs else 'equals'} meaning(X, 'en')")


def check_export(model: Disentangler) -> None:
    """Its ``meaning_map`` reproduces ``meaning`` for every training language."""
    mmap = model.meaning_map()
    assert mmap.by_language == model.uses_language, (
        f"{model.name}: an exported map is routed by language iff the recipe uses it")
    X = toy_pairs()[0][:12]
    for lang in ("de", "zh", "en"):
        got = apply_map(mmap, X, lang if mmap.by_language else None)
        np.testing.assert_allclose(got, model.meaning(X, lang), rtol=1e-4, atol=1e-4,
                                   err_msg=f"{model.name}: export differs for {lang!r}")


def check_tune(name: str, data_dir, tmp_path) -> None:
    """``tune`` runs a one-candidate grid taken from the recipe's own grid."""
    own = tuning_grid(name)
    grid = {**{k: v[:1] for k, v in own.items()}, **{k: [v] for k, v in fast_params(
        name).items() if k not in own}}
    data = TrainingData(("de", "zh"), 20, holdout_per_language=20)
    result = tune(TuneConfig(encoder=f"hash:{DIM}", methods=[name], data=data,
                             grids={name: grid}, out_dir=str(tmp_path / "tune"),
                             workspace=Workspace(data_dir=str(data_dir),
                                                 cache_dir=str(tmp_path / "cache"))))
    (run,) = result.runs
    assert run.spec["method"] == name and run.spec["params"] == {
        k: v[0] for k, v in grid.items()}
    assert np.isfinite(run.measurements["validation"]["validation_score"])


def check_recipe(name: str, data_dir, tmp_path) -> None:
    """Every clause above on the recipe registered as ``name``."""
    check_declarations(name)
    model = fitted(name)
    check_language_declaration_is_true(model)
    check_save_load(model, tmp_path)
    check_export(model)
    check_tune(name, data_dir, tmp_path)
