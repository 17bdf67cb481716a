"""The running top-k lists and the block screen, against plain top-k of everything seen."""

import numpy as np
import pytest
import torch

from disembed.retrieval.topk import (
    TopKLists,
    Window,
    _rank_in_run,
    _row_then_value_desc,
    update_both,
)


def test_sort_keys_order_rows_then_values_descending():
    vals = torch.tensor([0.5, -0.0, 0.0, -3.0, float("-inf"), 2.0, -1e-30, 7.0])
    rows = torch.tensor([1, 0, 0, 0, 1, 1, 0, 0])
    order = torch.sort(_row_then_value_desc(rows, vals)).indices
    got = [(int(rows[i]), float(vals[i])) for i in order]
    want = sorted(zip(rows.tolist(), vals.tolist(), strict=True), key=lambda t: (t[0], -t[1]))
    assert [r for r, _ in got] == [r for r, _ in want]
    assert [v for _, v in got] == [v for _, v in want]


def test_rank_in_run():
    runs = torch.tensor([0, 0, 0, 2, 5, 5, 5, 5])
    assert _rank_in_run(runs).tolist() == [0, 1, 2, 0, 0, 1, 2, 3]


def reference_lists(history, n, k):
    """Top-k of every (value, index) ever offered to each list; equal values: lower index."""
    out_v = np.full((n, k), -np.inf, dtype=np.float32)
    out_i = np.full((n, k), -1, dtype=np.int64)
    for row, items in history.items():
        best = sorted(items, key=lambda t: (-t[0], t[1]))[:k]
        out_v[row, : len(best)] = [v for v, _ in best]
        out_i[row, : len(best)] = [i for _, i in best]
    return out_v, out_i


def test_sparse_merges_and_list_merges_equal_top_k_of_everything():
    """Merges in any order, many ties (integers): the lists are the top k of everything
    offered, equal values ordered by lower index (issue 36), whatever order they came in."""
    rng = np.random.default_rng(0)
    n, k = 30, 5
    lists = TopKLists(n, k)
    history = {i: [] for i in range(n)}
    for step in range(40):
        if step % 7 == 0:  # a whole other set of lists merged in (another worker's)
            other = TopKLists(n, k)
            vals = rng.integers(-20, 20, (n, k)).astype(np.float32)
            idx = rng.permutation(10_000)[: n * k].reshape(n, k) + 1000
            order = np.argsort(-vals, axis=1, kind="stable")
            other.values[:] = torch.from_numpy(np.take_along_axis(vals, order, 1))
            other.indices[:] = torch.from_numpy(np.take_along_axis(idx, order, 1))
            lists.merge_lists(other)
            for i in range(n):
                history[i] += list(zip(vals[i].tolist(), idx[i].tolist(), strict=True))
        else:  # candidates for a few lists, several per list, in index order per list
            p = int(rng.integers(0, 25))
            rows = rng.integers(10, 20, p)  # within the span (10, 20)
            vals = rng.integers(-20, 20, p).astype(np.float32)
            idx = np.arange(100 * step, 100 * step + p)
            lists.merge_sparse(torch.from_numpy(rows), torch.from_numpy(idx),
                               torch.from_numpy(vals))
            for r, v, i in zip(rows.tolist(), vals.tolist(), idx.tolist(), strict=True):
                history[r].append((v, i))
    want_v, want_i = reference_lists(history, n, k)
    np.testing.assert_array_equal(lists.values.numpy(), want_v)
    np.testing.assert_array_equal(lists.indices.numpy(), want_i)


def _stream(S, k, R, C, group, fwd=None, bwd=None, order=None):
    """Feed ``S`` block by block (padded to multiples of ``group``) into the lists."""
    n, m = S.shape
    fwd = TopKLists(n, k) if fwd is None else fwd
    bwd = TopKLists(m, k) if bwd is None else bwd
    for r0 in order or range(0, n, R):
        for c0 in range(0, m, C):
            block = torch.from_numpy(S[r0 : r0 + R, c0 : c0 + C])
            r, c = block.shape
            padded = torch.full((-(-r // group) * group, -(-c // group) * group), -torch.inf)
            padded[:r, :c] = block
            update_both(padded, r, c, fwd, r0, bwd, c0, group)
    return fwd, bwd


@pytest.mark.parametrize("group", [1, 4, 16])
def test_update_both_over_a_stream_of_blocks(group):
    """Blocks of one similarity matrix fed in order give the top-k of its rows and columns,
    ties to the lower index."""
    rng = np.random.default_rng(group)
    S = rng.standard_normal((90, 130)).astype(np.float32)
    S[5, :] = S[5, 0]  # a row of ties
    S[:, 7] = 0.25  # a column of ties
    S[40:60, 100:110] = 3.0  # a block of ties
    k = 3
    fwd, bwd = _stream(S, k, 20, 24, group)
    for lists, M in ((fwd, S), (bwd, S.T)):
        want = np.argsort(-M, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(lists.indices.numpy(), want)
        np.testing.assert_array_equal(lists.values.numpy(), np.take_along_axis(M, want, 1))


def test_sort_keys_hold_row_numbers_up_to_2_to_the_31_in_either_int_width():
    """A list number takes the key's upper 32 bits (a database of 2^31 rows has lists that
    high), whatever integer type it comes in."""
    rows = torch.tensor([2**31 - 1, 2**30, 2**30 + 1, 0, 2**30])
    vals = torch.tensor([1.0, -2.0, 0.5, 3.0, 5.0])
    for r in (rows, rows.to(torch.int32)):
        assert torch.sort(_row_then_value_desc(r, vals)).indices.tolist() == [3, 4, 1, 2, 0]


@pytest.mark.parametrize("k", [3, 4, 8])
def test_a_sparse_merge_of_fewer_than_k_candidates_leaves_the_other_slots_empty(k):
    lists = TopKLists(3, k)
    lists.merge_sparse(torch.tensor([1, 1]), torch.tensor([7, 9]), torch.tensor([0.25, 0.5]))
    assert lists.indices.tolist() == [[-1] * k, [9, 7] + [-1] * (k - 2), [-1] * k]
    assert lists.values[1].tolist() == [0.5, 0.25] + [-np.inf] * (k - 2)


def test_a_first_block_is_screened_by_bounds_from_its_group_maxima(monkeypatch):
    """Empty lists take no dense top-k: the k-th largest group maximum of each row and
    column bounds its k-th best from below, so only a small share of a first block's
    entries is merged, and the lists are still exact."""
    merged = []
    merge = TopKLists.merge_sparse

    def counting(self, rows, idx, vals):
        merged.append(len(rows))
        merge(self, rows, idx, vals)

    monkeypatch.setattr(TopKLists, "merge_sparse", counting)
    S = np.random.default_rng(5).standard_normal((256, 512)).astype(np.float32)
    fwd, bwd = _stream(S, 2, 256, 512, 16)
    np.testing.assert_array_equal(fwd.values.numpy(), -np.sort(-S, axis=1)[:, :2])
    np.testing.assert_array_equal(bwd.values.numpy(), -np.sort(-S.T, axis=1)[:, :2])
    assert sum(merged) < 0.1 * S.size, merged


def test_row_blocks_out_of_order_and_lists_never_fed():
    """Fullness and thresholds are per list: row blocks fed out of order, and lists never
    fed, change nothing; entries in late blocks are found by the screen."""
    S = np.random.default_rng(6).random((40, 64)).astype(np.float32)
    S[:, :16] += 1  # every row's best three in the first column block ...
    S[22, 50] = S[13, 30] = 3  # ... but two, which the screen must find
    lists = TopKLists(40, 3)
    _stream(S, 3, 10, 16, 4, fwd=lists, bwd=TopKLists(64, 3), order=[20, 10])
    want = np.argsort(-S[10:30], axis=1)[:, :3]
    np.testing.assert_array_equal(lists.indices[10:30].numpy(), want)
    np.testing.assert_array_equal(lists.values[10:30].numpy(),
                                  np.take_along_axis(S[10:30], want, 1))
    assert lists.indices[13, 0] == 30 and lists.indices[22, 0] == 50  # the screen found them
    assert (lists.indices[:10] == -1).all() and (lists.indices[30:] == -1).all()


@pytest.mark.parametrize("seed", range(4))
def test_a_window_drops_only_entries_at_or_below_the_final_threshold(seed):
    """The certificate's premise (bf16.py): with a window, every entry a list dropped, by
    the screen, the cap or the window, is at or below the list's final threshold; the
    threshold is at least the window's cut below the keep-th best, and the keep best are
    the plain top keep."""
    rng = np.random.default_rng(seed)
    S = rng.integers(-400, 400, (70, 300)).astype(np.float32) / 8  # ties and near-ties
    keep, cap = 2, 6
    slack = torch.from_numpy(rng.uniform(0, 0.5, 70)).float()
    window = Window(keep=keep, rel=0.001, slack=slack)
    lists, _ = _stream(S, cap, 16, 40, 4, fwd=TopKLists(70, cap, window))
    thr = lists.thresholds(0, 70).numpy()
    vals, idx = lists.values.numpy(), lists.indices.numpy()
    for i in range(70):
        kept = set(idx[i][idx[i] >= 0].tolist())
        dropped = [S[i, j] for j in range(300) if j not in kept]
        assert max(dropped) <= thr[i]
        cut = vals[i, keep - 1] - (0.001 * abs(vals[i, keep - 1]) + slack[i].item())
        assert cut - 1e-6 * abs(cut) <= thr[i] <= vals[i, keep - 1]  # float32 rounding
    want = -np.sort(-S, axis=1)[:, :keep]
    np.testing.assert_array_equal(vals[:, :keep], want)
    assert (np.isfinite(vals).sum(1) < cap).any()  # the window, not only the cap, dropped


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_group_maxima_read_as_integers_where_the_thresholds_are_not_negative(dtype):
    """With thresholds >= 0 the block's group maxima are taken over the bit patterns: exact
    wherever a group holds a value >= 0 (+0 included), and some negative value of the
    group (-0, -inf padding included) where it holds none, which no threshold passes."""
    from disembed.retrieval.topk import _group_max

    rng = np.random.default_rng(7)
    S = torch.from_numpy(rng.standard_normal((8, 4, 50)).astype(np.float32)).to(dtype)
    S[0, :, :10] = -torch.rand(4, 10).to(dtype) - 0.1  # groups with no value >= 0
    S[1, :, 3] = torch.tensor([-0.0, -1.0, -torch.inf, -2.0]).to(dtype)
    S[2, :, 4] = torch.tensor([-0.0, 0.0, -1.0, -torch.inf]).to(dtype)
    S[3, :, :] = -torch.inf  # a group of padding rows
    want = S.amax(dim=1)
    got = _group_max(S, nonnegative=True)
    assert got.dtype == dtype
    kept = (~torch.signbit(S.float())).any(dim=1)  # a value >= +0 in the group
    assert torch.equal(got[kept], want[kept]) and kept[2, 4] and not kept[1, 3]
    assert (torch.signbit(got[~kept].float())).all()  # -0 or below: no threshold >= 0 passes
    members = (S == got[:, None, :]).any(dim=1)  # a value of its own group
    assert members.all()
    assert torch.equal(_group_max(S, nonnegative=False), want)
