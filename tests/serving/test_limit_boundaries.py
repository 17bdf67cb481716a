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


# --- a slot released on the error path too (issue 48.7, "released on success only") ---------

def test_a_request_whose_handler_fails_gives_its_concurrency_slot_back():
    """With the slot freed only after a handler that returns, every failed request (an
    encoder error, a client gone) kept its slot, and after ``limit`` failures the service
    answered 429 to everyone."""
    pytest.importorskip("starlette")
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from disembed.serving.admission import Admission, add_admission
    from disembed.serving.intake import BodyReads
    from disembed.serving.requests import Limits

    async def fail(request):
        raise RuntimeError("the encoder failed")

    async def ok(request):
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/fail", fail, methods=["POST"]),
                            Route("/ok", ok, methods=["POST"])])
    gate = Admission(limit=2)
    add_admission(app, gate, BodyReads(0), ("/fail", "/ok"),
                  lambda path, status, message, headers: JSONResponse({"error": message},
                                                                      status),
                  Limits())
    client = TestClient(app, raise_server_exceptions=False)
    for _ in range(3):  # more failures than the limit
        assert client.post("/fail").status_code == 500
    assert gate.active == 0
    assert client.post("/ok").status_code == 200


# --- the token limit: inclusive, and the server's own limit over the encoder's window --------

class _WordTokens:
    """An encoder whose tokens are its words, with a window of ``window`` tokens."""

    def __init__(self, window):
        self.max_input_tokens = window

    def token_counts(self, texts):
        return [len(t.split()) for t in texts]


def _fit(counter, text, truncate):
    texts, counts = counter.fit([text], counter.counts([text]), truncate, "input")
    return texts[0], counts[0]


def test_a_text_exactly_at_the_token_limit_is_taken_whole():
    from disembed.serving.service import ServiceError
    from disembed.serving.tokens import TokenCounter

    counter = TokenCounter(_WordTokens(512), max_input_tokens=3)
    assert _fit(counter, "a b c", truncate=False) == ("a b c", 3)
    assert _fit(counter, "a b c", truncate=True) == ("a b c", 3)
    with pytest.raises(ServiceError, match="has 4 tokens; at most 3"):
        _fit(counter, "a b c d", truncate=False)


def test_truncate_cuts_at_the_servers_limit_when_both_limits_are_set():
    """Two limits: the server's --max-input-tokens and the encoder's own window. The
    server's governs where it is set, below the window as above it."""
    from disembed.serving.tokens import TokenCounter

    below = TokenCounter(_WordTokens(6), max_input_tokens=3)
    assert _fit(below, "a b c d e", truncate=True) == ("a b c", 3)
    above = TokenCounter(_WordTokens(6), max_input_tokens=10)
    assert _fit(above, "a b c d e f g h", truncate=True) == ("a b c d e f g h", 8)
    window_only = TokenCounter(_WordTokens(6))
    assert _fit(window_only, "a b c d e f g h", truncate=True) == ("a b c d e f", 6)
