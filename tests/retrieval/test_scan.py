"""The pass over the blocks: workers, even row blocks, conversion, stopping on a failure."""

import threading
import time

import numpy as np
import pytest
import torch

from disembed.retrieval import scan as scan_module
from disembed.retrieval.scan import Blocks, as_tensor, balanced_rows, run_parallel, scan
from disembed.retrieval.topk import TopKLists


@pytest.mark.parametrize("n,rows,workers", [(40_000, 4096, 2), (100_000, 4096, 2),
                                            (1_000_000, 4096, 2), (99_999, 4096, 3),
                                            (5000, 4096, 2), (300, 4096, 2), (100, 4096, 2),
                                            (77, 8, 2), (3, 4096, 2)])
def test_row_blocks_are_shared_evenly_and_no_larger_than_asked(n, rows, workers):
    r = balanced_rows(n, rows, workers, 16)
    blocks = -(-n // r)
    assert r <= rows
    assert blocks % workers == 0 or r == 16  # even, unless too few rows for every worker
    assert blocks <= -(-n // rows) + workers  # never many more blocks than asked for


def test_a_failing_job_stops_the_others_and_raises():
    """The first error is raised; cancel() is called so that workers stop taking work."""
    cancelled, done = threading.Event(), []

    def job(i):
        if i == 3:
            raise RuntimeError("job 3 failed")
        cancelled.wait(0.2)
        done.append(i)

    with pytest.raises(RuntimeError, match="job 3 failed"):
        run_parallel(job, range(40), 2, cancel=cancelled.set)
    assert cancelled.is_set() and len(done) < 39


def test_the_scan_takes_no_more_row_blocks_after_a_worker_fails(monkeypatch):
    """Even when the caller's thread wakes late (a loaded CI machine: it once woke after the
    other worker had taken all 25 blocks), the failing worker itself stops the queue."""
    calls = []
    wait = scan_module.wait

    def late_wait(*args, **kw):
        out = wait(*args, **kw)
        time.sleep(0.3)
        return out

    monkeypatch.setattr(scan_module, "wait", late_wait)

    def failing(sims, r, c, fwd, r0, bwd, c0, group, **kw):
        calls.append(r0)
        if len(calls) == 3:
            raise RuntimeError("selection failed")

    monkeypatch.setattr(scan_module, "update_both", failing)
    x = np.random.default_rng(0).standard_normal((400, 8)).astype(np.float32)
    with pytest.raises(RuntimeError, match="selection failed"):
        scan(x, x, TopKLists(400, 2), TopKLists(400, 2), Blocks(16, 400, 1 << 20, 4),
             torch.float32, 2)
    assert len(calls) < 10  # of 25 row blocks


def test_rows_are_converted_piece_by_piece_from_any_float_matrix(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_module, "CONVERT_ROWS", 7)
    x = np.random.default_rng(1).standard_normal((50, 6))
    np.save(tmp_path / "x.npy", x.astype(">f4"))
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")  # big-endian, read-only
    for a in (x, x.astype(np.float32), mm):
        got = as_tensor(a, 3, 45, torch.bfloat16)
        want = torch.from_numpy(x[3:45].astype(np.float32)).bfloat16()
        assert got.dtype == torch.bfloat16 and torch.equal(got, want)
