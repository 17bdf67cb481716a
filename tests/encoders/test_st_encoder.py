"""The sentence-transformers backend on a tiny random model saved to a temp dir."""

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from tiny_bert import save_tiny_bert  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"),
                          ["hello", "world", "guten", "tag", "a", "b"])


def test_loads_local_folder_with_pooling_options(tiny_model_dir):
    from disembed import load_encoder

    mean = load_encoder(f"st:{tiny_model_dir}", pooling="mean")
    cls = load_encoder(f"st:{tiny_model_dir}", pooling="cls")
    a, b = mean.encode(["hello world", "guten tag"]), cls.encode(["hello world", "guten tag"])
    assert a.shape == (2, 16) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    assert not np.allclose(a, b)
    assert mean.identity.key != cls.identity.key
    assert mean.identity.revision.startswith("local:")


def test_prefix_changes_embedding_and_identity(tiny_model_dir):
    from disembed import load_encoder

    plain = load_encoder(f"st:{tiny_model_dir}", pooling="mean")
    prefixed = load_encoder(f"st:{tiny_model_dir}", pooling="mean", prefix="a b ")
    assert plain.identity.key != prefixed.identity.key
    assert not np.allclose(plain.encode(["hello"]), prefixed.encode(["hello"]))


def test_family_defaults():
    from disembed.encoders.st_encoder import family_defaults

    assert family_defaults("sentence-transformers/LaBSE")["pooling"] == "cls"
    assert family_defaults("intfloat/multilingual-e5-base")["prefix"] == "passage: "
    assert family_defaults("Qwen/Qwen3-Embedding-0.6B")["pooling"] == "lasttoken"


def test_bad_pooling_is_rejected(tiny_model_dir):
    from disembed import load_encoder
    from disembed.exceptions import ConfigError

    with pytest.raises(ConfigError, match="pooling must be one of"):
        load_encoder(f"st:{tiny_model_dir}", pooling="median")


def test_saved_sentence_transformers_folder_keeps_its_pooling(tiny_model_dir, tmp_path):
    from disembed import load_encoder

    built = load_encoder(f"st:{tiny_model_dir}", pooling="cls")
    built._model.save(str(tmp_path / "st-folder"))
    loaded = load_encoder(f"st:{tmp_path / 'st-folder'}")
    assert loaded.pooling == "cls"
    np.testing.assert_allclose(loaded.encode(["hello world"]), built.encode(["hello world"]),
                               atol=1e-5)
