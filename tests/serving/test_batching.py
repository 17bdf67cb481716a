"""The micro-batcher under concurrency (issue 32): requests that share texts are encoded
together, each distinct text once, and every request gets its own rows, in its order; an
encoder error reaches every request of the batch."""

import asyncio
import threading
import time

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.serving.batching import MicroBatcher, _Request

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


def _take_in_a_thread(batcher, last_batch):
    """``batcher._take()`` on a worker thread whose last batch held ``last_batch`` requests."""
    out = {}

    def run():
        batcher._last_requests[threading.get_ident()] = last_batch
        t0 = time.monotonic()
        out["items"] = batcher._take()
        out["seconds"] = time.monotonic() - t0

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _arrive(batcher, *texts):
    with batcher._ready:
        for text in texts:
            batcher._pending.append(_Request([text], None, 1, time.monotonic()))
        batcher._ready.notify()


def test_the_window_ends_once_the_last_batchs_clients_are_back():
    batcher = MicroBatcher(ENC.encode, window=30.0)
    thread, out = _take_in_a_thread(batcher, last_batch=3)
    time.sleep(0.1)  # the worker waits on an empty queue
    _arrive(batcher, "a", "b", "c")
    thread.join(10)
    assert not thread.is_alive(), "the batch waited out its 30 s window"
    assert [r.texts for r in out["items"]] == [["a"], ["b"], ["c"]]


def test_a_backlog_waits_for_the_clients_just_answered_and_the_batches_merge():
    batcher = MicroBatcher(ENC.encode, window=5.0)
    _arrive(batcher, "a", "b")  # arrived while the worker encoded its last batch of 2
    thread, out = _take_in_a_thread(batcher, last_batch=2)
    time.sleep(0.2)
    _arrive(batcher, "c", "d")  # that batch's clients are back
    thread.join(10)
    assert [r.texts[0] for r in out["items"]] == ["a", "b", "c", "d"]
    assert out["seconds"] < 4.0


def test_a_backlog_waits_at_most_one_window_for_clients_that_do_not_come():
    batcher = MicroBatcher(ENC.encode, window=0.3)
    _arrive(batcher, "a", "b")
    thread, out = _take_in_a_thread(batcher, last_batch=2)
    thread.join(10)
    assert [r.texts[0] for r in out["items"]] == ["a", "b"]
    assert 0.25 <= out["seconds"] < 5.0


def test_encode_seconds_sum_the_encoder_calls_and_their_retries():
    """``stats.encode_seconds`` is the time inside encoder calls (what a load test divides
    by its length to say how busy the encoder was): every call counted once, a failed
    batch's per-request retries too, and none of the window's waiting."""
    def encode(texts):
        time.sleep(0.05)
        if "bad" in texts and len(texts) > 1:
            raise ValueError("bad text")
        return ENC.encode(texts)

    batcher = MicroBatcher(encode, max_batch=2, window=0.3)
    t0 = time.perf_counter()
    run_concurrently(batcher, [["a"]])  # one call, after waiting out the window
    run_concurrently(batcher, [["c"], ["bad"]])  # full at once: fails, then 2 calls alone
    wall = time.perf_counter() - t0
    calls = 4
    assert 0.05 * calls <= batcher.stats.encode_seconds < 0.05 * calls + 0.15
    assert wall >= 0.3 + 0.05 * calls
    assert batcher.stats.encode_seconds < wall - 0.25  # the window's wait is not counted
