"""The exact k-NN on random shapes, block sizes, groups, chunks and precisions (hypothesis)."""

import numpy as np
import pytest
from knn_check import assert_exact_knn

from disembed.retrieval import KnnOptions, knn_both

hypothesis = pytest.importorskip("hypothesis", reason='pip install "disembed[dev]"')
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def matrix(rng, n, d, ties):
    if ties:  # small integers: many exactly equal similarities, exact in bfloat16 too
        return rng.integers(-2, 3, (n, d)).astype(np.float32)
    return rng.standard_normal((n, d)).astype(np.float32)


@settings(derandomize=True, database=None, max_examples=60, deadline=None,
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
