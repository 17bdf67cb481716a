"""The exact block-wise k-NN and faiss backends against the numpy brute-force reference."""

import numpy as np
import pytest

from disembed.exceptions import ConfigError, ShapeError
from disembed.mining import KnnOptions, brute_force_knn, knn, knn_both, normalize_rows, search
from disembed.retrieval.knn import canonical_lists


def unit(n, d, seed):
    return normalize_rows(np.random.default_rng(seed).standard_normal((n, d)))


def assert_same_neighbours(D, I, D_ref, I_ref, atol=1e-5):  # noqa: E741
    """Equal similarities everywhere; equal indices wherever the similarity is not tied."""
    np.testing.assert_allclose(D, D_ref, atol=atol)
    k = D_ref.shape[1]
    gaps = np.abs(np.diff(D_ref, axis=1))
    untied = np.ones_like(D_ref, dtype=bool)
    untied[:, :-1] &= gaps > atol
    untied[:, 1:] &= gaps > atol
    assert (I[untied] == I_ref[untied]).all()
    assert I.shape[1] == k


OPTIONS = [KnnOptions(block_rows=37, block_cols=53, precision="float32"),
           KnnOptions(block_rows=1000, block_cols=8, precision="float32"),
           KnnOptions(block_rows=64, block_cols=64, precision="bfloat16"),
           KnnOptions(block_rows=50, block_cols=70, precision="bfloat16", candidates=4)]


@pytest.mark.parametrize("options", OPTIONS,
                         ids=["odd-blocks", "thin-blocks", "bf16", "bf16-no-margin"])
def test_knn_both_matches_brute_force(options):
    x, y = unit(300, 24, 0), unit(211, 24, 1)
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, 4, options)
    assert_same_neighbours(D_xy, I_xy, *brute_force_knn(x, y, 4))
    assert_same_neighbours(D_yx, I_yx, *brute_force_knn(y, x, 4))
    assert D_xy.dtype == np.float32 and I_xy.dtype == np.int64


def test_knn_with_ties_and_duplicates():
    base = unit(20, 8, 2)
    y = np.concatenate([base, base, base])  # every neighbour appears three times
    x = base[:7]
    D, I = knn(x, y, 3, KnnOptions(block_rows=3, block_cols=7))  # noqa: E741
    np.testing.assert_allclose(D, 1.0, atol=1e-6)
    assert (I % 20 == np.arange(7)[:, None]).all()  # the three copies of itself, in any order


def test_knn_reads_memmaps(tmp_path):
    x, y = unit(120, 16, 3), unit(90, 16, 4)
    np.save(tmp_path / "y.npy", y)
    ym = np.load(tmp_path / "y.npy", mmap_mode="r")
    D, I = knn(x, ym, 5, KnnOptions(block_rows=50, block_cols=40))  # noqa: E741
    assert_same_neighbours(D, I, *brute_force_knn(x, y, 5))


def test_knn_errors():
    x = unit(10, 8, 0)
    with pytest.raises(ShapeError, match="8 features, but the other side has 4"):
        knn(unit(3, 4, 1), x, 2)
    with pytest.raises(ConfigError, match="between 1 and the database size 10"):
        knn(x, x, 11)
    with pytest.raises(ConfigError, match="precision"):
        KnnOptions(precision="int8")


@pytest.mark.parametrize("backend", ["faiss-flat", "faiss-hnsw", "faiss-ivf"])
def test_faiss_backends_match_brute_force(backend):
    pytest.importorskip("faiss", reason="faiss not installed: pip install 'disembed[faiss]'")
    x, y = unit(200, 16, 5), unit(500, 16, 6)
    D_ref, I_ref = brute_force_knn(x, y, 4)
    options = {"nlist": 8, "nprobe": 8} if backend == "faiss-ivf" else {}
    D, I = search(x, y, 4, backend, **options)  # nprobe = nlist: IVF is exhaustive here  # noqa: E741
    if backend == "faiss-hnsw":  # approximate: high recall, not identity
        recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(I, I_ref, strict=True)])
        assert recall > 0.9
    else:
        assert_same_neighbours(D, I, D_ref, I_ref)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_many_blocks_reach_the_sparse_screen(precision):
    """Enough blocks per list that most are merged through the group-maxima screen."""
    x, y = unit(700, 16, 7), unit(1100, 16, 8)
    options = KnnOptions(block_rows=64, block_cols=96, precision=precision)
    D_xy, I_xy, D_yx, I_yx = knn_both(x, y, 4, options)
    assert_same_neighbours(D_xy, I_xy, *brute_force_knn(x, y, 4))
    assert_same_neighbours(D_yx, I_yx, *brute_force_knn(y, x, 4))


@pytest.mark.parametrize("backend", ["exact", "exact-fp32", "exact-bf16"])
def test_every_exact_backend_is_exact(backend):
    x, y = unit(150, 12, 10), unit(260, 12, 11)
    D, I = search(x, y, 5, backend, block_rows=40, block_cols=64)  # noqa: E741
    assert_same_neighbours(D, I, *brute_force_knn(x, y, 5))


def test_canonical_lists_of_empty_lists_are_empty():
    """k = 0, which the old `if idx.size` guard before the sort meant to serve: the reshape of
    the gathered rows to (rows, 0, d) needs d spelled out (-1 cannot be inferred from zero
    elements, so it raised before reaching the guard)."""
    q = np.ones((3, 2), np.float32)
    D, I = canonical_lists(q, q, np.zeros((3, 0), np.float32), np.zeros((3, 0), np.int64))  # noqa: E741
    assert D.shape == I.shape == (3, 0) and D.dtype == np.float32
