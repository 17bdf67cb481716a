"""The exact k-NN's precision paths: the bfloat16 fallback, the probe's choice, bad options."""

import importlib

import numpy as np
import pytest
from knn_check import assert_exact_knn

from disembed.retrieval import KnnOptions, knn


def test_near_ties_below_bfloat16_resolution_are_still_exact(caplog):
    """Database rows closer than bfloat16 can tell apart: the certificate fails for most
    lists, they are searched again in float32, and the answer is still brute force."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal(32).astype(np.float32)
    y = base + 1e-4 * rng.standard_normal((200, 32)).astype(np.float32)
    x = base + 1e-3 * rng.standard_normal((50, 32)).astype(np.float32)
    caplog.set_level("INFO", logger="disembed.retrieval.knn")
    D, I = knn(x, y, 4, KnnOptions(precision="bfloat16", candidates=6, block_cols=64))  # noqa: E741
    assert_exact_knn(D, I, x, y, 4)
    assert "searched again in float32" in caplog.text
    searched_again = int(caplog.text.split("certified, ")[1].split()[0])
    assert searched_again > 0


def test_auto_precision_follows_the_probe(monkeypatch):
    knn_module = importlib.import_module("disembed.retrieval.knn")  # the package shadows it

    class Caps:
        bf16_faster = True

    monkeypatch.setattr(knn_module, "probe", lambda: Caps())
    assert KnnOptions().resolved_precision() == "bfloat16"
    Caps.bf16_faster = False
    assert KnnOptions().resolved_precision() == "float32"
    assert KnnOptions(precision="bfloat16").resolved_precision() == "bfloat16"


@pytest.mark.parametrize("kwargs", [{"precision": "int8"}, {"group": 0}, {"candidates": 0}])
def test_bad_options(kwargs):
    from disembed.exceptions import ConfigError

    with pytest.raises(ConfigError):
        KnnOptions(**kwargs)
