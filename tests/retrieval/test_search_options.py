"""The options a caller gives ``search`` / ``search_both`` reach the backend that runs
(issue 32): a recall target, nprobe or block sizes dropped on the way would silently search
with the defaults."""

import importlib

import numpy as np
import pytest

import disembed.retrieval.approximate as approximate
from disembed.retrieval import normalize_rows, search, search_both

search_module = importlib.import_module("disembed.retrieval.search")  # the name is a function


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return (normalize_rows(rng.standard_normal((60, 8)).astype(np.float32)),
            normalize_rows(rng.standard_normal((70, 8)).astype(np.float32)))


def test_exact_search_options_reach_the_exact_search(data, monkeypatch):
    seen = []
    real = search_module.knn
    monkeypatch.setattr(search_module, "knn", lambda q, d, k, options: seen.append(options)
                        or real(q, d, k, options))
    D, _ = search(*data, 3, "exact-fp32", block_rows=7, block_cols=9)
    assert [(o.precision, o.block_rows, o.block_cols) for o in seen] == [("float32", 7, 9)]
    np.testing.assert_allclose(D, search(*data, 3, "exact")[0], atol=1e-6)


def test_approximate_options_reach_both_directions(data, monkeypatch):
    pytest.importorskip("faiss")
    seen = []
    real = approximate.approximate_knn
    monkeypatch.setattr(approximate, "approximate_knn", lambda x, y, k, options: seen.append(
        options) or real(x, y, k, options))
    search_both(*data, 3, "approx", recall=0.999, nlist=4, seed=3)
    assert len(seen) == 2
    assert all((o.index, o.recall, o.nlist, o.seed) == ("ivf", 0.999, 4, 3) for o in seen)
