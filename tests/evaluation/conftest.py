"""Fake Embed / Views callables (the tiny data directory lives in tests/conftest.py)."""

import numpy as np
import pytest
from tiny_data import QE_ROWS, STS_ROWS

from disembed.encoders import HashEncoder


@pytest.fixture
def embed():
    """Identical texts -> identical vectors; records every call."""
    encoder = HashEncoder(dim=16)

    def fake_embed(texts):
        fake_embed.calls.append(list(texts))
        return encoder.encode(texts)

    fake_embed.calls = []
    return fake_embed


def two_views(e, lang):
    """meaning = the embedding; language = a constant per-language vector (like mean-centering)."""
    lang_vec = np.zeros(4, dtype=np.float32)
    lang_vec[sum(map(ord, lang)) % 4] = 1.0
    return {"meaning": e, "language": np.tile(lang_vec, (len(e), 1))}


@pytest.fixture
def views():
    return two_views


@pytest.fixture
def sts_rows():
    return STS_ROWS


@pytest.fixture
def qe_rows():
    return QE_ROWS
