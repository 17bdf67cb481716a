"""The running top-k lists and the block screen, against plain top-k of everything seen."""

import importlib

import numpy as np
import pytest
import torch

from disembed.retrieval.topk import (
    TopKLists,
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
    """Top-k of every (value, index) ever offered to each list."""
    out_v = np.full((n, k), -np.inf, dtype=np.float32)
    for row, items in history.items():
        best = sorted(items, key=lambda t: -t[0])[:k]
        out_v[row, : len(best)] = [v for v, _ in best]
    return out_v


def test_sparse_and_dense_merges_equal_top_k_of_everything():
    rng = np.random.default_rng(0)
    n, k = 30, 5
    lists = TopKLists(n, k)
    history = {i: [] for i in range(n)}
    next_idx = 0
    for step in range(40):
        if step % 7 == 0:  # a dense merge of every list
            m = int(rng.integers(1, 9))
            vals = rng.integers(-20, 20, (n, m)).astype(np.float32)  # integers: many ties
            idx = np.arange(next_idx, next_idx + n * m).reshape(n, m)
            next_idx += n * m
            top = torch.from_numpy(vals).topk(min(k, m), dim=1)
            lists.merge_dense(0, top.values, torch.from_numpy(idx).gather(1, top.indices))
            for i in range(n):
                history[i] += list(zip(vals[i].tolist(), idx[i].tolist(), strict=True))
        else:  # candidates for a few lists, several per list
            p = int(rng.integers(0, 25))
            rows = rng.integers(10, 20, p)  # within the span (10, 20)
            vals = rng.integers(-20, 20, p).astype(np.float32)
            idx = np.arange(next_idx, next_idx + p)
            next_idx += p
            lists.merge_sparse(torch.from_numpy(rows), torch.from_numpy(idx),
                               torch.from_numpy(vals))
            for r, v, i in zip(rows.tolist(), vals.tolist(), idx.tolist(), strict=True):
                history[r].append((v, i))
    np.testing.assert_array_equal(lists.values.numpy(), reference_lists(history, n, k))
    offered = {i: dict((j, v) for v, j in history[i]) for i in range(n)}
    for i in range(n):  # every kept index carries the value it was offered with
        for v, j in zip(lists.values[i].tolist(), lists.indices[i].tolist(), strict=True):
            assert j == -1 and v == -np.inf or offered[i][j] == v


@pytest.mark.parametrize("group", [1, 4, 16])
def test_update_both_over_a_stream_of_blocks(group):
    """Blocks of one similarity matrix fed in order give the top-k of its rows and columns."""
    rng = np.random.default_rng(group)
    S = rng.standard_normal((90, 130)).astype(np.float32)
    S[5, :] = S[5, 0]  # a row of ties
    S[:, 7] = 0.25  # a column of ties
    k, R, C = 3, 20, 24
    fwd, bwd = TopKLists(90, k), TopKLists(130, k)
    for r0 in range(0, 90, R):
        for c0 in range(0, 130, C):
            block = torch.from_numpy(S[r0 : r0 + R, c0 : c0 + C])
            r = len(block)
            rp = -(-r // group) * group
            padded = torch.full((rp, block.shape[1]), -torch.inf)
            padded[:r] = block
            update_both(padded, r, fwd, r0, bwd, c0, group)
    np.testing.assert_array_equal(fwd.values.numpy(), -np.sort(-S, axis=1)[:, :k])
    np.testing.assert_array_equal(bwd.values.numpy(), -np.sort(-S.T, axis=1)[:, :k])
    np.testing.assert_array_equal(np.take_along_axis(S, fwd.indices.numpy(), 1),
                                  fwd.values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(S.T, bwd.indices.numpy(), 1),
                                  bwd.values.numpy())


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


def test_new_column_lists_are_screened_by_their_kth_group_maximum(monkeypatch):
    """A first block: the row lists take a dense top-k; the empty column lists get the k-th
    largest group maximum as threshold (module docstring), so only the k groups holding a
    column's best entries are gathered (1/8 of the block), and the dense fallback never runs."""
    topk_module = importlib.import_module("disembed.retrieval.topk")
    dense, calls = topk_module._dense, []

    def recording_dense(*args):
        calls.append(args)
        dense(*args)

    monkeypatch.setattr(topk_module, "_dense", recording_dense)
    S = np.random.default_rng(5).standard_normal((64, 48)).astype(np.float32)
    fwd, bwd = TopKLists(64, 2), TopKLists(48, 2)
    update_both(torch.from_numpy(S), 64, fwd, 0, bwd, 0, group=4)
    np.testing.assert_array_equal(fwd.values.numpy(), -np.sort(-S, axis=1)[:, :2])
    np.testing.assert_array_equal(bwd.values.numpy(), -np.sort(-S.T, axis=1)[:, :2])
    assert calls == []


def test_row_lists_are_merged_densely_only_until_they_are_full():
    """Module docstring: a row list not yet full takes a dense top-k of the block; once a row
    block's lists are full, later blocks reach them through the screen only. Fullness is that
    of the block's own rows: row blocks fed out of order, and lists never fed, change nothing."""
    S = np.random.default_rng(6).random((40, 60)).astype(np.float32)
    S[:, :12] += 1  # every row's best three in the first column block ...
    S[22, 50] = S[13, 30] = 3  # ... but two, which the screen must find
    lists = TopKLists(40, 3)
    merge_dense, dense_starts = lists.merge_dense, []

    def recording_merge_dense(start, vals, idx):
        dense_starts.append(start)
        merge_dense(start, vals, idx)

    lists.merge_dense = recording_merge_dense
    for r0 in (20, 10):  # rows 0..10 and 30..40 are never fed
        for c0 in range(0, 60, 12):
            update_both(torch.from_numpy(S[r0 : r0 + 10, c0 : c0 + 12].copy()), 10, lists, r0,
                        None, c0, group=5)
    assert dense_starts == [20, 10]
    want = np.argsort(-S[10:30], axis=1)[:, :3]
    np.testing.assert_array_equal(lists.indices[10:30].numpy(), want)
    np.testing.assert_array_equal(lists.values[10:30].numpy(),
                                  np.take_along_axis(S[10:30], want, 1))
    assert lists.indices[13, 0] == 30 and lists.indices[22, 0] == 50  # the screen found them
    assert (lists.indices[:10] == -1).all() and (lists.indices[30:] == -1).all()
