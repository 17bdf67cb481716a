"""Issue 48.7, "a limit's boundary": each limit is inclusive, and a value exactly at it is
accepted: a batch exactly at its token budget, a truncation to the encoder's full
dimension. (The hash encoder's cap and DISEMBED_LOCK_TIMEOUT=0 are in
test_probe_cli_edges.py and test_model_folder_writers.py.)"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.encoders.truncated import TruncatedEncoder
from disembed.exceptions import ConfigError
from disembed.serving.batching import MicroBatcher

ENC = HashEncoder(8)


def _batches(max_batch_tokens, requests):
    """The encoder calls made for ``requests`` ``[(texts, tokens), ...]``, sent at once."""
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return ENC.encode(texts)

    batcher = MicroBatcher(encode, max_batch=64, window=0.3,
                           max_batch_tokens=max_batch_tokens)

    async def main():
        await batcher.start()
        try:
            return await asyncio.wait_for(asyncio.gather(
                *(batcher.encode(texts, tokens=n) for texts, n in requests)), 10)
        finally:
            await batcher.stop()

    got = asyncio.run(main())
    for (texts, _), rows in zip(requests, got, strict=True):
        np.testing.assert_array_equal(rows, ENC.encode(texts))
    return calls


def test_requests_that_exactly_fill_the_token_budget_share_one_batch():
    calls = _batches(10, [(["a", "b"], 6), (["c"], 4)])
    assert calls == [["a", "b", "c"]]


def test_one_token_over_the_budget_starts_the_next_batch():
    calls = _batches(10, [(["a", "b"], 6), (["c"], 5)])
    assert calls == [["a", "b"], ["c"]]


def test_truncating_to_the_full_dimension_is_allowed_and_changes_nothing():
    whole = TruncatedEncoder(ENC, ENC.dim)
    assert whole.dim == ENC.dim
    np.testing.assert_array_equal(whole.encode(["eins", "zwei"]), ENC.encode(["eins", "zwei"]))
    for k in (0, ENC.dim + 1):
        with pytest.raises(ConfigError, match=f"k must be in \\[1, {ENC.dim}\\]"):
            TruncatedEncoder(ENC, k)
    assert TruncatedEncoder(ENC, 1).dim == 1
