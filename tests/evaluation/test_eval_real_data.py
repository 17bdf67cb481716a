"""Sanity runs on the real benchmark data with the hash encoder (run with -m slow)."""

import os
from pathlib import Path

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.evaluation import TASKS

DATA = Path(os.environ.get("DISEMBED_DATA_DIR", "/work/shared/data"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "tatoeba").is_dir(), reason=f"no benchmark data at {DATA}"),
]


def _views(e, lang):
    return {"meaning": e, "language": np.full((len(e), 2), 1.0 + (lang == "en"))}


def test_tatoeba_real():
    s = TASKS.get("tatoeba")(languages="tatoeba-36", data_dir=DATA).evaluate(
        HashEncoder(dim=32).encode, _views)
    assert len(s.data_sizes) == 36 and max(s.data_sizes.values()) == 1000
    assert s.data_sizes["sw"] == 390 and s.data_sizes["de"] == 1000
    assert [r.n for r in s.averages if r.subset == "avg:tatoeba-14"][0] == 14
    assert s.main_score("meaning") < 0.02  # random vectors: chance level
    assert s.get("language", "de", "acc_mean") == pytest.approx(1 / 1000)


def test_sts17_real():
    s = TASKS.get("sts17")(tracks="all", data_dir=DATA).evaluate(HashEncoder(dim=32).encode, _views)
    assert set(s.data_sizes.values()) == {250} and len(s.data_sizes) == 11
    assert abs(s.main_score("meaning")) < 0.2 and np.isnan(s.main_score("language"))


def test_wmt20_qe_real():
    s = TASKS.get("wmt20-qe")(data_dir=DATA).evaluate(HashEncoder(dim=32).encode, _views)
    assert s.data_sizes == {p: 1000 for p in ["en-de", "en-zh", "et-en", "ne-en", "ro-en",
                                              "ru-en", "si-en"]}
    assert [r.n for r in s.averages if r.subset == "avg:wmt20-6"][0] == 6
    assert abs(s.main_score("meaning")) < 0.2
