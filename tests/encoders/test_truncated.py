"""Truncation to the first k dimensions, and a truncated run on tiny data."""

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.encoders.truncated import TruncatedEncoder, truncate
from disembed.evaluation import EvalOptions
from disembed.exceptions import ConfigError
from disembed.experiment import RunSpec, TrainingData, Workspace, run


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


def test_a_truncated_run_fits_and_evaluates_on_the_first_k_dimensions(full_data_dir):
    options = EvalOptions(task_options={"tatoeba": {"languages": ("de", "zh")}})
    data = TrainingData(("de", "zh"), 40)
    for method in ("baseline", "mean-centering"):
        spec = RunSpec(method=method, encoder="hash:16", truncate=4, tasks=("tatoeba",),
                       evaluation=options, data=data if method != "baseline" else None)
        result = run(spec, Workspace(data_dir=str(full_data_dir)))
        assert result.encoder["dim"] == 4 and result.model.dim_ == 4
        assert 0 <= result.score("tatoeba") <= 1
        assert ("language" in result.scores[0].views()) == (method == "mean-centering")
    with pytest.raises(ConfigError, match="truncate"):
        RunSpec(truncate=0)
