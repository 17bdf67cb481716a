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


def test_a_bfloat16_model_opens_in_float32_with_a_warning_and_nothing_else_does(
        tmp_path, caplog):
    """The documented rule: the backend says which identities stand in for each other."""
    bf16 = e5_torch_identity("passage", "bfloat16", "torch", "abc", dim=16)
    path = _save(tmp_path, HashEncoder(16), encoder=bf16.to_dict(), encoder_spec="e5-small")
    saved = SavedModel.load(path)
    fp32 = SimpleNamespace(identity=e5_torch_identity("passage", "float32", "torch", "abc",
                                                      dim=16), dim=16)
    with caplog.at_level(logging.WARNING, logger="disembed"):
        saved.check_encoder(fp32)
    assert "bfloat16" in caplog.text and "accepted" in caplog.text
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
