"""The bfloat16 error bound holds on every pair, and is small enough to certify most lists."""

import numpy as np
import pytest
import torch

from disembed.retrieval.bf16 import ULP_BF16, RoundingStats, certified, gamma


@pytest.mark.parametrize("scale", [1.0, 1e-3, 50.0])
def test_float32_score_never_exceeds_bfloat16_score_plus_delta(scale):
    rng = np.random.default_rng(0)
    x = (scale * rng.standard_normal((300, 384))).astype(np.float32)
    y = (rng.standard_normal((500, 384)) * rng.uniform(0.1, 3, (500, 1))).astype(np.float32)
    s = x.astype(np.float64) @ y.astype(np.float64).T
    s_bf = (torch.from_numpy(x).bfloat16() @ torch.from_numpy(y).bfloat16().T).double().numpy()
    qx, qy = RoundingStats.of(x), RoundingStats.of(y)
    delta = (ULP_BF16 * np.abs(s_bf) + qx.err[:, None] * qy.norm.max()
             + qx.norm_bf[:, None] * qy.err.max()
             + gamma(384) * (qx.norm_bf[:, None] * qy.norm_bf.max() + qx.norm[:, None]
                             * qy.norm.max()))
    assert (s <= s_bf + delta).all()
    assert np.abs(s - s_bf).max() > 0  # bfloat16 really is coarser


def test_certificate_accepts_clear_gaps_and_rejects_close_calls():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 8)).astype(np.float32)
    db = rng.standard_normal((10, 8)).astype(np.float32)
    sq, sdb = RoundingStats.of(q), RoundingStats.of(db)
    m = np.array([0.5, 0.5])
    ok = certified(np.array([0.9, 0.5001]), m, sq, sdb, 8)
    assert ok.tolist() == [True, False]


def test_most_lists_are_certified_on_unit_vectors(caplog):
    """The bound is tight enough to matter: random unit vectors, k=4, 20 candidates."""
    from knn_check import assert_exact_knn

    from disembed.retrieval import KnnOptions, knn

    rng = np.random.default_rng(2)
    x = rng.standard_normal((400, 64)).astype(np.float32)
    y = rng.standard_normal((3000, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    caplog.set_level("INFO", logger="disembed.retrieval.knn")
    D, I = knn(x, y, 4, KnnOptions(precision="bfloat16"))  # noqa: E741
    assert_exact_knn(D, I, x, y, 4)
    certified_lists = int(caplog.text.split("bfloat16 k-NN: ")[1].split()[0])
    assert certified_lists >= 0.9 * len(x), caplog.text
