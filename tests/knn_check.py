"""Tie-aware check of a k-NN answer against float64 brute force (shared by the k-NN tests)."""

import numpy as np


def assert_exact_knn(D, I, queries, database, k, atol=1e-5):  # noqa: E741
    """``D, I (nq, k)`` is a correct top-k: the brute-force values in order, and each index
    names a distinct database row whose similarity is the value reported beside it."""
    sims = np.asarray(queries, np.float64) @ np.asarray(database, np.float64).T
    ref = -np.sort(-sims, axis=1)[:, :k]
    assert D.shape == I.shape == (len(queries), k)
    assert D.dtype == np.float32 and I.dtype == np.int64
    np.testing.assert_allclose(D, ref, atol=atol)
    assert ((I >= 0) & (I < len(database))).all()
    np.testing.assert_allclose(np.take_along_axis(sims, I, axis=1), D, atol=atol)
    assert all(len(set(row)) == k for row in I.tolist())
