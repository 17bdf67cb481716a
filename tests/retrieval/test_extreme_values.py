"""Similarities of finite rows of extreme size (issue 22: 1e38 scored 0.000000 or nan)."""

import numpy as np

from disembed.retrieval.knn import normalize_rows


def test_rows_near_the_float32_limit_are_normalised_right():
    X = np.array([[1e38, 1e38, 0.0], [3e38, 0.0, 0.0], [1e-30, 0.0, 1e-30], [0, 0, 0]],
                 dtype=np.float32)
    unit = normalize_rows(X)
    assert unit.dtype == np.float32 and np.isfinite(unit).all()
    np.testing.assert_allclose(np.linalg.norm(unit[:3], axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(unit[0], [2 ** -0.5, 2 ** -0.5, 0], rtol=1e-6)
    assert not unit[3].any()  # a zero row stays zero
