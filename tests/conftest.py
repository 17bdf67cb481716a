import logging
import os

import numpy as np
import pytest
import torch
from tiny_data import add_full_data, write_tiny_data

from disembed.encoders import HashEncoder

# The test tensors are tiny: extra threads only spin, and on a shared, loaded CPU they
# made a 2-epoch toy fit take seconds instead of a fraction of one.
torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """Caches (the hardware probe's too) go to a temporary folder unless one is set."""
    if not os.environ.get("DISEMBED_CACHE_DIR"):
        os.environ["DISEMBED_CACHE_DIR"] = str(tmp_path_factory.mktemp("disembed-cache"))


@pytest.fixture
def tiny_data_dir(tmp_path):
    """Tatoeba, STS17 and WMT20 QE in their real layout, a few rows each."""
    return write_tiny_data(tmp_path)


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


@pytest.fixture
def full_data_dir(tiny_data_dir):
    """``tiny_data_dir`` plus all ten STS17 tracks and de-en, zh-en training pairs."""
    return add_full_data(tiny_data_dir)
