"""The micro-batcher under concurrency (issue 32): requests that share texts are encoded
together, each distinct text once, and every request gets its own rows, in its order; an
encoder error reaches every request of the batch."""

import asyncio
import threading

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.serving.batching import MicroBatcher

ENC = HashEncoder(dim=8)


def run_concurrently(batcher, requests, timeout=10.0):
    async def main():
        await batcher.start()
        try:
            return await asyncio.wait_for(asyncio.gather(
                *(batcher.encode(texts) for texts in requests), return_exceptions=True), timeout)
        finally:
            await batcher.stop()
    return asyncio.run(main())


def test_requests_sharing_texts_each_get_their_own_rows():
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return ENC.encode(texts)

    requests = [["a", "b", "a"], ["b", "c"], ["a"], ["d", "a", "c", "b"], ["b", "b"]]
    batcher = MicroBatcher(encode, max_batch=64, window=0.2)
    got = run_concurrently(batcher, requests)
    for texts, rows in zip(requests, got, strict=True):
        np.testing.assert_array_equal(rows, ENC.encode(texts))
    assert len(calls) == 1 and sorted(calls[0]) == ["a", "b", "c", "d"]  # each text once
    assert batcher.stats.texts == 12 and batcher.stats.encoded == 4


def test_an_encoder_error_reaches_every_request_of_the_batch():
    def encode(texts):
        raise RuntimeError("the encoder failed")

    got = run_concurrently(MicroBatcher(encode, max_batch=64, window=0.2),
                           [["a"], ["b", "c"], ["d"]])
    assert all(isinstance(g, RuntimeError) for g in got), got


def test_one_requests_bad_text_fails_only_that_request():
    """A batch whose encoder call fails is encoded request by request: the request holding
    the text the encoder refuses gets its own error, the others their rows."""
    def encode(texts):
        if "bad" in texts:
            raise ValueError("cannot embed 'bad'")
        return ENC.encode(texts)

    requests = [["a", "b"], ["c", "bad"], ["b", "d"]]
    got = run_concurrently(MicroBatcher(encode, max_batch=64, window=0.2), requests)
    assert isinstance(got[1], ValueError) and "bad" in str(got[1])
    np.testing.assert_array_equal(got[0], ENC.encode(requests[0]))
    np.testing.assert_array_equal(got[2], ENC.encode(requests[2]))


def test_a_request_larger_than_the_batch_goes_alone_and_the_others_follow():
    sizes = []

    def encode(texts):
        sizes.append(len(texts))
        return ENC.encode(texts)

    requests = [[f"x{i}" for i in range(5)], ["y0", "y1"], ["y2"]]
    got = run_concurrently(MicroBatcher(encode, max_batch=3, window=0.2), requests)
    for texts, rows in zip(requests, got, strict=True):
        np.testing.assert_array_equal(rows, ENC.encode(texts))
    assert sizes == [5, 3]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_batch, max_batch_tokens and workers must be >= 1"):
        MicroBatcher(ENC.encode, max_batch=0)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        MicroBatcher(ENC.encode, workers=0)


def test_two_workers_encode_two_batches_at_once_and_each_request_gets_its_rows():
    """``workers=2``: a second batch starts while the first is still encoding (a barrier
    both calls must reach: a single worker would time out on it), and every request still
    gets its own rows; the counters add up over both threads."""
    both_inside = threading.Barrier(2, timeout=5)
    calls = []

    def encode(texts):
        calls.append(list(texts))
        both_inside.wait()  # raises BrokenBarrierError unless two calls run at once
        return ENC.encode(texts)

    requests = [["a", "b"], ["c"], ["d", "e"], ["f"]]  # two batches of three texts
    batcher = MicroBatcher(encode, max_batch=3, window=0.2, workers=2)
    got = run_concurrently(batcher, requests)
    for texts, rows in zip(requests, got, strict=True):
        np.testing.assert_array_equal(rows, ENC.encode(texts))
    assert len(calls) == 2 and batcher.stats.batches == 2 and batcher.stats.requests == 4
