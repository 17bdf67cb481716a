"""The exact k-NN on random shapes, block sizes, groups and precisions, against brute force."""

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from knn_check import assert_exact_knn

from disembed.retrieval import KnnOptions, knn, knn_both


def matrix(rng, n, d, ties):
    if ties:  # small integers: many exactly equal similarities, exact in bfloat16 too
        return rng.integers(-2, 3, (n, d)).astype(np.float32)
    return rng.standard_normal((n, d)).astype(np.float32)


@settings(derandomize=True, max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(1, 90), m=st.integers(1, 90), d=st.integers(1, 20),
       block_rows=st.integers(1, 70), block_cols=st.integers(1, 70),
       group=st.sampled_from([1, 2, 3, 16]), precision=st.sampled_from(["float32", "bfloat16"]),
       ties=st.booleans(), seed=st.integers(0, 2**16))
def test_knn_both_equals_brute_force(data, n, m, d, block_rows, block_cols, group, precision,
                                     ties, seed):
    k = data.draw(st.integers(1, min(n, m, 8)), label="k")
    chunk_rows = data.draw(st.sampled_from([7, 1 << 20]), label="chunk_rows")
    rng = np.random.default_rng(seed)
    x, y = matrix(rng, n, d, ties), matrix(rng, m, d, ties)
    options = KnnOptions(block_rows=block_rows, block_cols=block_cols, group=group,
                         precision=precision, chunk_rows=chunk_rows)
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, k, options)
    assert_exact_knn(D_xy, I_xy, x, y, k, atol=1e-4)
    assert_exact_knn(D_yx, I_yx, y, x, k, atol=1e-4)


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
