"""Fixtures of the reliability tests: the world of files (built once per module)."""

import pytest
from world import build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))


@pytest.fixture
def env(world, monkeypatch, tmp_path):
    """The world's data and cache folders as the defaults; ``tmp_path`` for outputs."""
    monkeypatch.setenv("DISEMBED_DATA_DIR", world.paths["data"])
    monkeypatch.setenv("DISEMBED_CACHE_DIR", world.paths["cache"])
    monkeypatch.setenv("DISEMBED_PROGRESS", "0")
    return world
