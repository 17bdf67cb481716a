"""Truncation to the first k dimensions, and the sweep on tiny data."""

import numpy as np
import pytest

from disembed.analysis.truncation import TruncatedEncoder, truncate, truncation_sweep
from disembed.data.parallel import ParallelPairs
from disembed.encoders import HashEncoder
from disembed.exceptions import ConfigError


def test_truncate_shapes_and_values():
    X = np.arange(12, dtype=np.float64).reshape(3, 4)
    out = truncate(X, 2)
    assert out.shape == (3, 2) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, X[:, :2])
    for k in (0, 5):
        with pytest.raises(ConfigError):
            truncate(X, k)


def test_truncated_encoder_identity_and_output():
    enc = HashEncoder(dim=16)
    t = TruncatedEncoder(enc, 4)
    assert t.dim == 4 and t.identity.dim == 4 and t.identity != enc.identity
    np.testing.assert_array_equal(t.encode(["a", "b"]), enc.encode(["a", "b"])[:, :4])


def test_sweep_rows(tiny_data_dir):
    pairs = ParallelPairs([f"Satz {i}" for i in range(40)], [f"Sentence {i}" for i in range(40)],
                          ["de"] * 40, ["en"] * 40)
    rows = truncation_sweep(["baseline", "mean-centering"], HashEncoder(dim=16), pairs, [4, 8],
                            tasks=["tatoeba"], data_dir=tiny_data_dir,
                            task_options={"tatoeba": {"languages": ["de", "zh"]}})
    assert [(r["k"], r["method"]) for r in rows] == [(4, "baseline"), (4, "mean-centering"),
                                                    (8, "baseline"), (8, "mean-centering")]
    assert all(0 <= r["meaning"] <= 1 for r in rows)
    assert np.isnan(rows[0]["language"]) and not np.isnan(rows[1]["language"])
