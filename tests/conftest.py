import logging

import numpy as np
import pytest

from disembed.encoders import HashEncoder


@pytest.fixture(autouse=True)
def _quiet_progress(monkeypatch):
    monkeypatch.setenv("DISEMBED_PROGRESS", "0")


@pytest.fixture
def hash_encoder():
    return HashEncoder(dim=16)


@pytest.fixture
def toy_pairs():
    """Embeddings with a shared meaning plus a per-language offset: (src, tgt, src_lang)."""
    rng = np.random.default_rng(0)
    n, d = 600, 16
    meaning = rng.standard_normal((n, d))
    offsets = {lang: 3 * rng.standard_normal(d) for lang in ("de", "zh", "en")}
    src_lang = np.array(["de", "zh"] * (n // 2), dtype=object)
    src = meaning + np.stack([offsets[x] for x in src_lang]) + 0.1 * rng.standard_normal((n, d))
    tgt = meaning + offsets["en"] + 0.1 * rng.standard_normal((n, d))
    return src.astype(np.float32), tgt.astype(np.float32), src_lang


@pytest.fixture(autouse=True)
def _no_log_noise():
    logging.getLogger("disembed").setLevel(logging.WARNING)
