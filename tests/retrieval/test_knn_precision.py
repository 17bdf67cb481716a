"""The exact k-NN's precision paths: the bfloat16 fallback, the probe's choice, bad options."""

import importlib
import re

import numpy as np
import pytest
import torch
from knn_check import assert_exact_knn

from disembed.exceptions import ConfigError
from disembed.retrieval import KnnOptions, knn


def near_ties(m):
    """50 queries and ``m`` database rows all close to one vector: bfloat16 cannot tell the
    database rows apart."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal(32).astype(np.float32)
    y = base + 1e-4 * rng.standard_normal((m, 32)).astype(np.float32)
    x = base + 1e-3 * rng.standard_normal((50, 32)).astype(np.float32)
    return x, y


def certificate_counts(log: str) -> tuple[int, int, int]:
    """(certified, lists, searched again) from the bfloat16 search's log line."""
    found = re.search(r"(\d+) of (\d+) lists certified, (\d+) searched again in", log)
    return tuple(map(int, found.groups()))


def test_near_ties_below_bfloat16_resolution_are_still_exact(caplog):
    """Database rows closer than bfloat16 can tell apart: the certificate fails for most
    lists, they are searched again in float32, and the answer is still brute force."""
    x, y = near_ties(200)
    caplog.set_level("INFO", logger="disembed.retrieval.knn")
    D, I = knn(x, y, 4, KnnOptions(precision="bfloat16", candidates=6, block_cols=64))  # noqa: E741
    assert_exact_knn(D, I, x, y, 4)
    certified, lists, searched_again = certificate_counts(caplog.text)
    assert searched_again > 0 and certified + searched_again == lists == len(x)


def test_lists_holding_every_database_row_need_no_second_search(caplog):
    """The same near-ties, but k' = 20 candidates of 20 database rows: the re-scored
    candidates are the whole database, exact without a certificate."""
    x, y = near_ties(20)
    caplog.set_level("INFO", logger="disembed.retrieval.knn")
    D, I = knn(x, y, 4, KnnOptions(precision="bfloat16", candidates=20))  # noqa: E741
    assert_exact_knn(D, I, x, y, 4, atol=1e-4)  # float32 rounding of scores near 40
    assert certificate_counts(caplog.text) == (50, 50, 0)


def test_the_search_again_keeps_the_callers_blocks_chunks_and_group(monkeypatch, caplog):
    """Lists the certificate rejects are searched again, first in bfloat16 with
    WIDE_CANDIDATES candidates, then (those still uncertified) with float32 products and
    their own certificate, each with the caller's block sizes, memory bound (chunk_rows)
    and screen group, not the defaults."""
    knn_module = importlib.import_module("disembed.retrieval.knn")
    scan, scans = knn_module._scan, []

    def recording_scan(x, y, fwd, bwd, opt, dtype):
        scans.append((opt.block_rows, opt.block_cols, opt.chunk_rows, opt.group, dtype, fwd.k,
                      len(x)))
        scan(x, y, fwd, bwd, opt, dtype)

    monkeypatch.setattr(knn_module, "_scan", recording_scan)
    caplog.set_level("INFO", logger="disembed.retrieval.knn")
    x, y = near_ties(200)
    options = KnnOptions(precision="bfloat16", candidates=6, block_rows=9, block_cols=13,
                         chunk_rows=50, group=2)
    assert_exact_knn(*knn(x, y, 4, options), x, y, 4)
    lines = re.findall(r"(\w+) k-NN: (\d+) of (\d+) lists certified, (\d+) searched again in "
                       r"(\w+)", caplog.text)
    sizes = (9, 13, 50, 2)
    dtypes = {"bfloat16": torch.bfloat16, "float32": torch.float32}
    assert [(p, int(n)) for p, _, n, _, _ in lines[:2]] == [("bfloat16", 50), ("bfloat16", 50)]
    assert lines[1][4] == "float32" and int(lines[1][3]) > 0  # not settled in bfloat16
    assert scans[:2] == [(*sizes, torch.bfloat16, 6, 50), (*sizes, torch.bfloat16, 64, 50)]
    for (prod, _, n, _, _), scanned in zip(lines, scans, strict=True):  # one scan a line
        assert scanned == (*sizes, dtypes[prod], scanned[5], int(n))


def test_auto_precision_follows_the_probe(monkeypatch):
    knn_module = importlib.import_module("disembed.retrieval.knn")  # the package shadows it

    class Caps:
        bf16_faster = True

    monkeypatch.setattr(knn_module, "probe", lambda: Caps())
    assert KnnOptions().resolved_precision() == "bfloat16"
    Caps.bf16_faster = False
    assert KnnOptions().resolved_precision() == "float32"
    assert KnnOptions(precision="bfloat16").resolved_precision() == "bfloat16"


@pytest.mark.parametrize("kwargs", [{"precision": "int8"}, {"group": 0}, {"candidates": 0}])
def test_bad_options(kwargs):
    with pytest.raises(ConfigError):
        KnnOptions(**kwargs)


@pytest.mark.parametrize("bad", [0, -3])
@pytest.mark.parametrize("field", ["block_rows", "block_cols", "chunk_rows", "group"])
def test_each_block_size_below_one_is_refused_with_all_four_sizes_named(field, bad):
    """Refused when the options are made (not as a range() error deep in the scan)."""
    sizes = {"block_rows": 5, "block_cols": 6, "chunk_rows": 7, "group": 8}
    sizes[field] = bad  # in place: the message lists the sizes in this order
    message = ("block_rows, block_cols, chunk_rows and group must be >= 1, got "
               + ", ".join(map(str, sizes.values())))
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        KnnOptions(**sizes)


def test_sizes_and_candidates_of_one_are_allowed_and_zero_is_refused():
    x, y = near_ties(7)
    ones = KnnOptions(block_rows=1, block_cols=1, chunk_rows=1, group=1, precision="float32")
    assert_exact_knn(*knn(x[:5], y, 2, ones), x[:5], y, 2)
    assert KnnOptions(candidates=1).widened(4, "bfloat16") == 4  # never fewer than k
    with pytest.raises(ConfigError, match="^candidates must be >= 1, got 0$"):
        KnnOptions(candidates=0)
    with pytest.raises(ConfigError, match="^candidates must be >= 1, got -2$"):
        KnnOptions(candidates=-2)
