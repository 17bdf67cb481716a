"""The service's limits, unit by unit: batches counted in tokens, the concurrency limit and
its Retry-After, token counts and truncation.

Bugs feared: a batch counted in texts only (64 long texts in one encoder call), a token
budget that splits a request or starves a large one, a limit that lets one more in or
never lets anyone in again, a truncation that cuts too much, too little, or differently
each time.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from disembed.encoders import HashEncoder, load_encoder
from disembed.serving.admission import Admission
from disembed.serving.batching import MicroBatcher
from disembed.serving.service import ServiceError
from disembed.serving.tokens import TokenCounter


def _run_batches(requests, **options):
    """Each request ``(texts, tokens)`` sent at once; returns the encoder calls' texts."""
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return np.zeros((len(texts), 2), np.float32)

    async def main():
        batcher = MicroBatcher(encode, window=0.05, **options)
        await batcher.start()
        try:
            await asyncio.gather(*(batcher.encode(t, tokens=n) for t, n in requests))
        finally:
            await batcher.stop()
        return batcher.stats

    stats = asyncio.run(main())
    return calls, stats


def test_a_batch_is_counted_in_tokens_as_well_as_texts():
    long = [([f"long {i}"], 300) for i in range(4)]  # 4 texts of 300 tokens each
    calls, stats = _run_batches(long, max_batch=64, max_batch_tokens=512)
    assert [len(c) for c in calls] == [1, 1, 1, 1]  # 2 x 300 > 512: one text a batch
    assert stats.largest_tokens == 300
    calls, _ = _run_batches(long, max_batch=64)  # texts only: one call
    assert [len(c) for c in calls] == [4]


def test_small_requests_share_a_batch_up_to_the_budget_and_a_large_one_goes_alone():
    requests = [([f"s{i}"], 100) for i in range(5)] + [(["huge"], 5000)]
    calls, _ = _run_batches(requests, max_batch=64, max_batch_tokens=250)
    assert all(len(c) <= 2 for c in calls)  # 2 x 100 <= 250 < 3 x 100
    assert ["huge"] in calls  # over the budget by itself: encoded alone, not refused
    assert sorted(t for c in calls for t in c) == sorted(["huge", *[f"s{i}" for i in range(5)]])


def test_admission_refuses_beyond_the_limit_and_frees_a_place_on_leaving():
    gate = Admission(limit=2)
    assert gate.enter() and gate.enter()
    assert not gate.enter()  # the third in flight
    assert (gate.active, gate.rejected, gate.peak) == (2, 1, 2)
    gate.leave(2.4)
    assert gate.enter()  # a place again
    assert gate.retry_after() == 3  # the time a request took, whole seconds
    gate.leave(0.01)
    gate.leave(0.01)
    assert gate.active == 0 and gate.retry_after() >= 1
    with pytest.raises(ValueError):
        Admission(limit=0)


def test_words_are_counted_without_a_tokenizer_and_cut_by_words():
    counter = TokenCounter(HashEncoder(8), max_input_tokens=3)
    assert counter.unit == "words" and counter.counts(["a b c d", "x"]) == [4, 1]
    texts, counts = counter.fit(["a b c d", "x"], [4, 1], truncate=True, param="input")
    assert texts == ["a b c", "x"] and counts == [3, 1]
    with pytest.raises(ServiceError, match=r"'input\[0\]' has 4 words; at most 3") as err:
        counter.fit(["a b c d", "x"], [4, 1], truncate=False, param="input")
    assert err.value.status == 413


def test_no_limit_leaves_long_texts_whole():
    counter = TokenCounter(HashEncoder(8))
    text = "word " * 1000
    assert counter.fit([text], [1000], truncate=False, param="input") == ([text], [1000])


@pytest.mark.parametrize("limit", [8, 20, 64])
def test_e5_truncation_keeps_the_longest_prefix_that_fits(limit):
    encoder = load_encoder("e5-small-torch")
    counter = TokenCounter(encoder, max_input_tokens=limit)
    assert counter.unit == "tokens"
    text = ("Die Katze schläft auf dem warmen Sofa, während draußen der Regen fällt. " * 6)
    cut = counter.cut(text, limit)
    n = encoder.token_counts([cut])[0]
    assert n <= limit and text.startswith(cut)
    longer = text[: len(cut) + 2]  # one more word's worth does not fit
    assert encoder.token_counts([longer.rstrip()])[0] > limit or longer.rstrip() == cut
    assert counter.cut(text, limit) == cut  # the same every time


def test_truncation_without_a_server_limit_cuts_at_the_encoders_window():
    counter = TokenCounter(load_encoder("e5-small-torch"))
    text = "palabra " * 800
    n = counter.counts([text])[0]
    assert n > 512
    assert counter.fit([text], [n], truncate=False, param="inputs")[0] == [text]
    (cut,), (m,) = counter.fit([text], [n], truncate=True, param="inputs")
    assert m <= 512 and text.startswith(cut)


def test_a_failed_batch_fails_only_the_request_whose_text_failed():
    def encode(texts):
        if "bad" in texts:
            raise ValueError(f"cannot embed {texts}")
        return np.ones((len(texts), 2), np.float32)

    async def main():
        batcher = MicroBatcher(encode, window=0.05)
        await batcher.start()
        try:
            return await asyncio.gather(batcher.encode(["good 1"]), batcher.encode(["bad"]),
                                        batcher.encode(["good 2", "good 3"]),
                                        return_exceptions=True)
        finally:
            await batcher.stop()

    one, bad, two = asyncio.run(main())
    assert one.shape == (1, 2) and two.shape == (2, 2)
    assert isinstance(bad, ValueError) and "good" not in str(bad)  # its own texts only


def test_a_backlog_is_one_call_and_waits_at_most_one_window_for_the_answered_clients():
    """While one batch encodes, the next requests queue; the worker takes them itself once it
    is free, one call per backlog, after waiting at most one window for the clients its last
    batch answered (here they do not come back)."""
    calls = []

    def encode(texts):
        calls.append((time.monotonic(), list(texts)))
        time.sleep(0.2)
        return np.zeros((len(texts), 2), np.float32)

    async def main():
        batcher = MicroBatcher(encode, window=0.15)
        await batcher.start()
        try:
            first = asyncio.ensure_future(batcher.encode(["a"]))
            await asyncio.sleep(0.17)  # "a" is encoding now
            later = [asyncio.ensure_future(batcher.encode([t])) for t in "bcd"]
            await asyncio.gather(first, *later)
        finally:
            await batcher.stop()

    asyncio.run(main())
    assert [c[1] for c in calls] == [["a"], ["b", "c", "d"]]
    gap = calls[1][0] - calls[0][0]
    assert 0.2 + 0.1 < gap < 0.2 + 0.15 + 0.1  # the first call, then one 0.15 s window
