"""The approximate path: nprobe chosen by measured recall, exact similarities, auto backend."""

from __future__ import annotations

import importlib
import logging

import numpy as np
import pytest

pytest.importorskip("faiss")

from disembed.exceptions import ConfigError  # noqa: E402
from disembed.mining import MineConfig, mine_embeddings  # noqa: E402
from disembed.retrieval.approximate import (  # noqa: E402
    ApproximateOptions,
    approximate_knn,
    choose_nprobe,
    fill_index,
    recall_at_k,
    search_index,
    train_index,
)
from disembed.retrieval.knn import KnnOptions, knn, normalize_rows  # noqa: E402
from disembed.retrieval.search import resolve_backend, search_both  # noqa: E402

search_module = importlib.import_module("disembed.retrieval.search")


def clustered(n: int, seed: int, d: int = 32, centres: int = 50) -> np.ndarray:
    """Unit rows around shared centres (the structure IVF cells exploit)."""
    rng = np.random.default_rng(seed)
    c = np.random.default_rng(99).standard_normal((centres, d)).astype(np.float32)
    noise = rng.standard_normal((n, d)).astype(np.float32)
    return normalize_rows(c[rng.integers(centres, size=n)] + 0.6 * noise)


X, Y = clustered(3000, 1), clustered(4000, 2)
EXACT_D, EXACT_I = knn(X, Y, 4, KnnOptions(precision="float32"))


def test_recall_at_k_counts_shared_neighbours():
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    found = np.array([[4, 3, 9, 9], [8, 7, 6, 5]])  # 2 of 4, then 4 of 4
    assert recall_at_k(found, exact) == pytest.approx((0.5 + 1.0) / 2)


@pytest.mark.parametrize("target", [0.5, 0.9, 0.99])
def test_nprobe_is_the_smallest_probed_value_reaching_the_target(target):
    opt = ApproximateOptions(recall=target, sample=500)
    index = fill_index(train_index(Y, opt), Y)
    cal = choose_nprobe(index, X, Y, 4, opt)
    assert cal.recall >= target and cal.curve[cal.nprobe] == cal.recall
    below = [p for p in cal.curve if p < cal.nprobe]
    assert all(cal.curve[p] < target for p in below)  # a smaller nprobe misses the target
    doubled = [p for p in cal.curve if p & (p - 1) == 0]
    assert doubled == [2 ** i for i in range(len(doubled))]
    if cal.nprobe > 2:  # bisected: the value 1/16 of a step below it missed the target
        assert any(cal.nprobe - max(1, cal.nprobe // 16) <= p < cal.nprobe for p in below)
    # the sample's recall predicts the recall over every query
    _, found = search_index(index, X, Y, 4, cal.nprobe, opt)
    assert recall_at_k(found, EXACT_I) >= target - 0.03


def test_higher_targets_visit_more_cells_and_every_cell_is_exact():
    low = approximate_knn(X, Y, 4, ApproximateOptions(recall=0.6))[2]
    high = approximate_knn(X, Y, 4, ApproximateOptions(recall=0.99))[2]
    assert low.nprobe < high.nprobe
    D, I, _ = approximate_knn(X, Y, 4, ApproximateOptions(nprobe=10_000, nlist=40))  # noqa: E741
    assert recall_at_k(I, EXACT_I) == 1.0
    np.testing.assert_allclose(D, EXACT_D, atol=1e-5)


@pytest.mark.parametrize("index", ["ivf", "ivfpq"])
def test_similarities_of_found_neighbours_are_exact(index):
    opt = ApproximateOptions(index=index, pq_bytes=8, recall=0.9)
    D, I, _ = approximate_knn(X, Y, 4, opt)  # noqa: E741
    assert (I >= 0).all() and (np.diff(D, axis=1) <= 1e-6).all()
    exact = np.einsum("nkd,nd->nk", Y[I], X)
    np.testing.assert_allclose(D, exact, atol=1e-5)
    assert recall_at_k(I, EXACT_I) >= 0.87


def test_rows_short_of_k_neighbours_search_every_cell():
    # 200 cells of ~20 rows each and k=30: one cell never holds 30 rows
    D, I, _ = approximate_knn(X, Y, 30, ApproximateOptions(nlist=200, nprobe=1, sample=50))  # noqa: E741
    assert (I >= 0).all() and np.isfinite(D).all()
    assert all(len(set(row)) == 30 for row in I.tolist())


def test_options_are_checked():
    with pytest.raises(ConfigError, match="recall must be in"):
        ApproximateOptions(recall=1.5)
    with pytest.raises(ConfigError, match="approximate index must be one of"):
        ApproximateOptions(index="hnsw")
    with pytest.raises(ConfigError, match="must divide the dimension 32"):
        train_index(Y, ApproximateOptions(index="ivfpq", pq_bytes=5))


def test_auto_is_exact_up_to_the_crossover_and_measured_above(monkeypatch, caplog):
    assert resolve_backend("auto", 1000, 1000) == "exact"
    assert resolve_backend("exact", 10**9, 10**9) == "exact"
    monkeypatch.setattr(search_module, "EXACT_UP_TO", 1000 * 999)
    assert resolve_backend("auto", 1000, 1000) == "auto"  # search_both measures
    monkeypatch.setattr(search_module.importlib.util, "find_spec", lambda name: None)
    with caplog.at_level(logging.WARNING):
        assert resolve_backend("auto", 1000, 1000) == "exact"
    assert "faiss is not installed" in caplog.text


def test_approximate_mining_finds_the_exact_pairs():
    rng = np.random.default_rng(3)
    y = clustered(3000, 4)
    x = normalize_rows(y[:2000] + 0.05 * rng.standard_normal((2000, 32)).astype(np.float32))
    cfg = dict(k=4, mode="max-score", threshold=1.05)
    exact = mine_embeddings(x, y, MineConfig(backend="exact", **cfg))
    approx = mine_embeddings(x, y, MineConfig(backend="approx", backend_options={"recall": 0.95},
                                              **cfg))
    assert approx.backend == "approx" and exact.backend == "exact"
    e = set(zip(exact.src.tolist(), exact.tgt.tolist(), strict=True))
    a = set(zip(approx.src.tolist(), approx.tgt.tolist(), strict=True))
    assert len(e) > 1500 and len(e & a) / len(e) >= 0.97
    lists = search_both(x, y, 4, "approx", recall=0.95)
    assert [a.shape for a in lists] == [(2000, 4)] * 2 + [(3000, 4)] * 2


def test_mine_cli_takes_a_recall_target_and_refuses_one_outside_0_1(tmp_path, capsys):
    from disembed.cli import main

    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("alpha\nbeta\ngamma\ndelta\nepsilon\n")
    tgt.write_text("gamma\nalpha\nbeta\nzeta\n")
    argv = ["mine", str(src), str(tgt), "--out", str(tmp_path / "m.tsv"), "--encoder", "hash:8",
            "--cache-dir", str(tmp_path / "cache"), "-k", "2"]
    with pytest.raises(SystemExit) as bad:
        main([*argv, "--recall", "1.5"])
    err = capsys.readouterr().err
    assert bad.value.code == 2 and "must be in (0, 1], e.g. 0.95; got 1.5" in err
    assert main([*argv, "--backend", "approx", "--recall", "0.9"]) == 0
    assert "approx; k-NN" in capsys.readouterr().out
    rows = (tmp_path / "m.tsv").read_text().splitlines()[1:]
    assert {tuple(r.split("\t")[1:3]) for r in rows} >= {("alpha", "alpha"), ("gamma", "gamma")}


def test_shards_sharing_one_quantiser_equal_one_index():
    """Per-target-shard indexes (one trained quantiser, filled shard by shard), searched and
    merged, visit the same cells as one index over all rows: the same calibration, lists at
    least as good at every rank (a shard whose cells hold fewer than k rows searches again in
    all its cells, so it can only find more)."""
    from disembed.retrieval.approximate import choose_nprobe_sharded, search_shards

    opt = ApproximateOptions(recall=0.9, sample=400)
    trained = train_index(Y, opt)
    whole = fill_index(trained, Y)
    cuts = [0, 1500, 2600, len(Y)]
    shards = [(fill_index(trained, Y[a:b]), Y[a:b], a) for a, b in zip(cuts, cuts[1:],
                                                                        strict=False)]
    cal_whole = choose_nprobe(whole, X, Y, 4, opt)
    cal_shards = choose_nprobe_sharded(shards, X, 4, opt)
    assert cal_shards.nprobe == cal_whole.nprobe
    assert all(cal_shards.curve[p] >= cal_whole.curve[p] for p in cal_whole.curve)
    D1, I1 = search_index(whole, X, Y, 4, cal_whole.nprobe, opt)
    D2, I2 = search_shards(shards, X, 4, cal_shards.nprobe, opt)
    assert (D2 >= D1 - 1e-6).all()
    assert recall_at_k(I2, I1) > 0.99 and recall_at_k(I2, EXACT_I) >= 0.9


def test_projection_weighs_both_paths_with_the_builds():
    from disembed.retrieval.approximate import Calibration
    from disembed.retrieval.auto import project

    # 1,000 timed queries: exact 2 s, approximate 0.5 s; 1M x 1M; build 60 s, calibrate 100 s
    cal = Calibration(64, 0.98, 0.98, {}, 1000, exact_seconds=2.0, approx_seconds=0.5)
    p = project(10**6, 10**6, cal, 60.0, 100.0)
    assert p.exact == pytest.approx(2000.0)  # one pass serves both ways
    assert p.approximate == pytest.approx(500 + 60 + 100 + 500)
    assert p.approximate_wins
    # the way back and the second build count: 1 s per 1,000 approximate queries wins one
    # direction (1000 < 2000) but not both (1000 + 160 + 1000 > 2000)
    slow = Calibration(64, 0.98, 0.98, {}, 1000, exact_seconds=2.0, approx_seconds=1.0)
    assert not project(10**6, 10**6, slow, 60.0, 100.0).approximate_wins


@pytest.mark.parametrize("approx_wins", [True, False])
def test_auto_above_the_crossover_runs_the_path_measured_cheaper(monkeypatch, caplog,
                                                                 approx_wins):
    auto_module = importlib.import_module("disembed.retrieval.auto")
    monkeypatch.setattr(search_module, "EXACT_UP_TO", 100)
    real_project = auto_module.project
    seen = []

    def fixed(n, m, cal, build_s, cal_s):
        seen.append((n, m, cal.queries, cal.exact_seconds > 0, cal.approx_seconds > 0))
        real = real_project(n, m, cal, build_s, cal_s)
        return auto_module.Projection(exact=real.approximate + (1 if approx_wins else -1),
                                      approximate=real.approximate)

    monkeypatch.setattr(auto_module, "project", fixed)
    rng = np.random.default_rng(5)
    y = clustered(3000, 6)
    x = normalize_rows(y[:2000] + 0.05 * rng.standard_normal((2000, 32)).astype(np.float32))
    cfg = dict(k=4, mode="max-score", threshold=1.05)
    with caplog.at_level(logging.INFO, logger="disembed.retrieval.auto"):
        mined = mine_embeddings(x, y, MineConfig(backend="auto", **cfg))
    assert mined.backend == ("approx" if approx_wins else "exact")
    assert seen == [(2000, 3000, 1000, True, True)]
    assert f"backend auto: {mined.backend} for 2000 x 3000" in caplog.text
    exact = mine_embeddings(x, y, MineConfig(backend="exact", **cfg))
    e = set(zip(exact.src.tolist(), exact.tgt.tolist(), strict=True))
    a = set(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True))
    if approx_wins:
        assert len(e & a) / len(e) >= 0.97
    else:  # the exact path: the same pairs and scores as asking for exact
        assert a == e
        np.testing.assert_array_equal(mined.score, exact.score)


def test_auto_search_one_direction_measures_too(monkeypatch):
    monkeypatch.setattr(search_module, "EXACT_UP_TO", 100)
    y = clustered(3000, 7)
    x = y[:500]
    D, I = search_module.search(x, y, 4, "auto")  # noqa: E741
    De, Ie = knn(x, y, 4, KnnOptions(precision="float32"))  # noqa: N806
    assert recall_at_k(I, Ie) >= 0.98
