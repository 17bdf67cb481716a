"""The exact block-wise k-NN and faiss backends against the numpy brute-force reference."""

import importlib
import logging
import math
import warnings

import numpy as np
import pytest
import torch

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


# ------------------------------------------------------------- contracts (issue 21.1)

@pytest.mark.parametrize("k,expected", [(1, 9), (4, 12), (16, 24), (100, 108)])
def test_lists_keep_k_plus_8_candidates_in_bfloat16_and_k_plus_4_in_float32(k, expected):
    assert KnnOptions().widened(k, "bfloat16") == expected
    assert KnnOptions().widened(k, "float32") == expected - 4
    for precision in ("bfloat16", "float32"):  # never fewer than k
        assert KnnOptions(candidates=3).widened(k, precision) == max(k, 3)


def test_k_defaults_to_4():
    x, y = unit(9, 6, 12), unit(7, 6, 13)
    assert [a.shape for a in knn(x, y)] == [(9, 4), (9, 4)]
    assert [a.shape for a in knn_both(x, y)] == [(9, 4), (9, 4), (7, 4), (7, 4)]


def test_errors_name_the_argument_and_its_shape():
    x = unit(10, 8, 0)
    not_2d = r"^{} must be a 2-d \(n, d\) matrix, got shape \(8,\)$"
    with pytest.raises(ShapeError, match=not_2d.format("queries")):
        knn(x[0], x, 2)
    with pytest.raises(ShapeError, match=not_2d.format("database")):
        knn(x, x[0], 2)
    with pytest.raises(ShapeError, match="^database has 4 features, but the other side has 8$"):
        knn(x, unit(3, 4, 1), 2)
    with pytest.raises(ConfigError, match="^k must be between 1 and the query set size 3, got 5$"):
        knn_both(unit(3, 8, 1), x, 5)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_big_endian_float32_gives_the_native_answer(precision):
    """A '>f4' array (a .npy written on a big-endian machine) is float32 too; torch refuses
    a non-native byte order, so every array handed to it is converted first."""
    x, y = unit(40, 16, 20), unit(70, 16, 21)
    options = KnnOptions(block_rows=16, block_cols=32, precision=precision)
    D, I = knn(x.astype(">f4"), y.astype(">f4"), 4, options)  # noqa: E741
    D_native, I_native = knn(x, y, 4, options)
    np.testing.assert_array_equal(D, D_native)
    np.testing.assert_array_equal(I, I_native)


def test_read_only_memmaps_are_copied_before_torch_sees_them(tmp_path):
    """torch wraps a read-only array only with a warning (a write through the tensor would be
    undefined behaviour): blocks of a read-only memmap reach it as copies, silently."""
    np.save(tmp_path / "x.npy", unit(50, 8, 22))
    np.save(tmp_path / "y.npy", unit(60, 8, 23))
    x, y = (np.load(tmp_path / f"{n}.npy", mmap_mode="r") for n in "xy")
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # the warning is otherwise shown once per process
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            D, I = knn(x, y, 3, KnnOptions(block_rows=16, block_cols=16, precision="float32"))  # noqa: E741
    finally:
        torch.set_warn_always(always)
    assert_same_neighbours(D, I, *brute_force_knn(x, y, 3))


def test_the_progress_bar_counts_every_query_row_once_per_database_chunk(monkeypatch, capsys):
    monkeypatch.setenv("DISEMBED_PROGRESS", "1")
    log = logging.getLogger("disembed")
    level = log.level
    log.setLevel(logging.INFO)
    try:  # 25 database rows in chunks of 10: three passes over the 30 queries
        knn(unit(30, 8, 24), unit(25, 8, 25), 3,
            KnnOptions(block_rows=7, chunk_rows=10, precision="float32"))
    finally:
        log.setLevel(level)
    summary = capsys.readouterr().err.rstrip("\n").split("\n")[-1].split("\r")[-1]
    assert summary.startswith("k-NN: 100%") and " 90/90 " in summary, summary
    assert "row/s" in summary or "s/row" in summary, summary


def test_knn_keeps_running_lists_for_the_queries_only(monkeypatch):
    """Memory (module docstring: the running lists are (n, k') per direction): the one-way
    search builds no lists for the database rows, which for a large database would be its
    size times k' entries; knn_both builds them for both sides (k' = k + 4 in float32)."""
    knn_module = importlib.import_module("disembed.retrieval.knn")  # the package shadows it
    scan, lists = knn_module._scan, []

    def recording_scan(x, y, fwd, bwd, opt, dtype):
        lists.append((tuple(fwd.values.shape), None if bwd is None else tuple(bwd.values.shape)))
        scan(x, y, fwd, bwd, opt, dtype)

    monkeypatch.setattr(knn_module, "_scan", recording_scan)
    x, y, options = unit(30, 8, 30), unit(50, 8, 31), KnnOptions(precision="float32")
    assert_same_neighbours(*knn(x, y, 3, options), *brute_force_knn(x, y, 3))
    knn_both(x, y, 3, options)
    assert lists == [((30, 7), None), ((30, 7), (50, 7))]


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_float64_torch_default_dtype_changes_nothing(precision):
    """A process may set torch's default dtype to float64 (scientific code does): the search
    still answers float32 scores, bit for bit those of the float32 default. It raised
    (index_put of float32 candidates into a float64 tensor) before every float tensor of
    the lists named its dtype."""
    x, y = unit(80, 16, 32), unit(120, 16, 33)
    options = KnnOptions(block_rows=16, block_cols=32, precision=precision, candidates=4, group=4)
    want = knn_both(x, y, 3, options)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = knn_both(x, y, 3, options)
    finally:
        torch.set_default_dtype(default)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _rounded_dots(q, db, pairs):
    """float32 of each exact dot product (float32 products are exact in float64; fsum
    rounds their sum once)."""
    q64 = np.asarray(q, np.float64)
    return np.array([[math.fsum(q64[i] * db[j]) for j in row] for i, row in enumerate(pairs)]
                    ).astype(np.float32)


def test_brute_force_rounds_exact_dot_products_once():
    rng = np.random.default_rng(26)
    x = rng.standard_normal((6, 256)).astype(np.float32)
    y = rng.standard_normal((9, 256)).astype(np.float32)
    D, I = brute_force_knn(x, y, 9)  # noqa: E741
    exact = _rounded_dots(x, y, [range(9)] * 6)
    order = [sorted(range(9), key=lambda j, i=i: (-exact[i, j], j)) for i in range(6)]
    assert D.dtype == np.float32 and I.dtype == np.int64
    np.testing.assert_array_equal(I, order)
    np.testing.assert_array_equal(D, np.take_along_axis(exact, I, axis=1))


def test_brute_force_breaks_ties_by_lower_index():
    y = np.tile(np.array([[1, 0], [0, 1]], np.float32), (50, 1))  # scores 1, 0, 1, 0, ...
    D, I = brute_force_knn(np.array([[1, 0]], np.float32), y, 10)  # noqa: E741
    assert I.tolist() == [list(range(0, 20, 2))] and (D == 1).all()


def test_canonical_lists_recompute_each_pair_and_sort_by_score_then_index():
    rng = np.random.default_rng(27)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    y = rng.standard_normal((12, 64)).astype(np.float32)
    I_in = np.stack([rng.permutation(12)[:6] for _ in range(5)])  # any order
    I_before = I_in.copy()
    D, I = canonical_lists(x, y, np.zeros((5, 6)), I_in, block=2)  # noqa: E741
    exact = _rounded_dots(x, y, I_in)
    want = [sorted(zip(-exact[i], I_in[i], strict=True)) for i in range(5)]
    assert D.dtype == np.float32 and D.shape == I.shape == (5, 6)
    np.testing.assert_array_equal(I, [[j for _, j in row] for row in want])
    np.testing.assert_array_equal(D, [[-v for v, _ in row] for row in want])
    np.testing.assert_array_equal(I_in, I_before)  # the caller's lists are not touched


def test_canonical_lists_order_float32_ties_by_index_and_put_missing_entries_last():
    """Row 1 scores 2^-30 higher than row 0 in float64, but both round to 1.0 in float32: the
    reported scores tie, so the lower index comes first. ``-1`` (a list shorter than k, as
    faiss returns from a database smaller than k) gets -inf, even with a one-row database."""
    q = np.array([[1, 1]], np.float32)
    db = np.array([[1, 0], [1, 2.0**-30]], np.float32)
    D, I = canonical_lists(q, db, np.zeros((1, 3), np.float32), np.array([[1, -1, 0]]))  # noqa: E741
    assert I.tolist() == [[0, 1, -1]] and D.tolist() == [[1.0, 1.0, -np.inf]]
    D, I = canonical_lists(q, db[:1], np.zeros((1, 3), np.float32), np.array([[-1, 0, -1]]))  # noqa: E741
    assert I.tolist() == [[0, -1, -1]] and D.tolist() == [[1.0, -np.inf, -np.inf]]


def test_canonical_lists_of_empty_lists_are_empty():
    """k = 0, which the old `if idx.size` guard before the sort meant to serve: the reshape of
    the gathered rows to (rows, 0, d) needs d spelled out (-1 cannot be inferred from zero
    elements, so it raised before reaching the guard)."""
    q = np.ones((3, 2), np.float32)
    D, I = canonical_lists(q, q, np.zeros((3, 0), np.float32), np.zeros((3, 0), np.int64))  # noqa: E741
    assert D.shape == I.shape == (3, 0) and D.dtype == np.float32
