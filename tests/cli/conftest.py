"""Fixtures of the CLI tests."""

import pytest

#: a small hash-encoder ``disembed train`` run, what the train tests share
TRAIN_ARGS = ["--encoder", "hash:16", "--languages", "de,zh", "--pairs-per-language", "40",
              "--max-epochs", "2", "--train-batch-size", "16"]


@pytest.fixture
def train_args() -> list[str]:
    """:data:`TRAIN_ARGS`, a fresh list."""
    return list(TRAIN_ARGS)


@pytest.fixture
def train_env(full_data_dir, tmp_path, monkeypatch):
    """``tmp_path``, with the test data folder and an empty embedding cache in the
    environment of a ``disembed train`` run."""
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path
