"""Ray mining on a small local cluster equals the single-process run."""

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.mining import MineConfig, mine_embeddings, normalize_rows
from disembed.mining.distributed import merge_lists


def test_merge_lists_equals_one_search():
    from disembed.mining import brute_force_knn

    rng = np.random.default_rng(0)
    x = normalize_rows(rng.standard_normal((30, 8)))
    y = normalize_rows(rng.standard_normal((50, 8)))
    parts = [(*brute_force_knn(x, y[a:b], 3), a) for a, b in ((0, 20), (20, 45), (45, 50))]
    D, I = merge_lists(parts, 3)  # noqa: E741
    D_ref, I_ref = brute_force_knn(x, y, 3)
    np.testing.assert_allclose(D, D_ref, atol=1e-6)
    np.testing.assert_array_equal(I, I_ref)


@pytest.mark.slow  # starting Ray workers (each imports torch) took 221 s on the shared 2-core box
def test_ray_mining_equals_single_process(tmp_path):
    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'disembed[ray]'")
    from disembed.mining.distributed import mine_distributed

    src = [f"s{i}\tSatz {i}" for i in range(70)]
    tgt = [f"t{i}\tSatz {i}" for i in range(35, 120)]
    (tmp_path / "s.tsv").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.tsv").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    cfg = MineConfig(k=4)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        mined, _, _ = mine_distributed(tmp_path / "s.tsv", tmp_path / "t.tsv", "hash:32",
                                       run_dir=tmp_path / "run", config=cfg, shard_rows=25,
                                       cache_dir=str(tmp_path / "cache"))
    finally:
        ray.shutdown()
    assert len(list((tmp_path / "run").glob("src-*.npy"))) == 3
    enc = HashEncoder(dim=32)
    x = normalize_rows(enc.encode([s.split("\t")[1] for s in src]))
    y = normalize_rows(enc.encode([t.split("\t")[1] for t in tgt]))
    single = mine_embeddings(x, y, cfg)
    np.testing.assert_allclose(mined.score, single.score, rtol=1e-5)
    assert set(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True)) == set(
        zip(single.src.tolist(), single.tgt.tolist(), strict=True))
