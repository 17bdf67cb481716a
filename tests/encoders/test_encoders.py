import numpy as np
import pytest

from disembed.encoders import ENCODERS, HashEncoder, load_encoder
from disembed.exceptions import DataError, UnknownNameError


def test_hash_encoder_is_deterministic_and_normalised():
    a = HashEncoder(32).encode(["hello", "world", "hello"])
    assert a.shape == (3, 32) and a.dtype == np.float32
    np.testing.assert_array_equal(a[0], a[2])
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-6)
    assert abs(float(a[0] @ a[1])) < 0.9


def test_unknown_encoder_suggests_a_name():
    with pytest.raises(UnknownNameError, match="Did you mean 'use-m3'"):
        load_encoder("use-m4")


def test_bad_sentences_are_named():
    with pytest.raises(DataError, match="sentence 1 is empty"):
        HashEncoder(4).encode(["ok", "  "])
    with pytest.raises(DataError, match="single string"):
        HashEncoder(4).encode("oops")


def test_npy_encoder_round_trip_and_errors(tmp_path):
    texts = ["a", "b", "c"]
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "v.npy", matrix)
    (tmp_path / "v.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    enc = load_encoder(f"npy:{tmp_path / 'v.npy'}")
    np.testing.assert_array_equal(enc.encode(["c", "a"]), matrix[[2, 0]])
    with pytest.raises(DataError, match="no precomputed embedding"):
        enc.encode(["zzz"])
    (tmp_path / "v.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(DataError, match="must be line-aligned"):
        load_encoder(f"npy:{tmp_path / 'v.npy'}")


def test_identity_key_changes_with_settings():
    assert HashEncoder(8).identity.key != HashEncoder(16).identity.key
    assert HashEncoder(8).identity.key == HashEncoder(8).identity.key


def test_registry_lists_bundled_backends():
    assert {"e5-small", "e5-small-c", "use-m3", "st", "npy", "hash"} <= set(ENCODERS.names())
