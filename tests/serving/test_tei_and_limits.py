"""The service as TEI clients and overloaded services need it, on a live uvicorn server:
``POST /embed`` in TEI's shape (httpx, and huggingface_hub's InferenceClient), ``truncate``,
the concurrency limit's 429 with ``Retry-After``, batches counted in tokens.

Bugs feared: /embed answering in OpenAI's shape or not normalising by default, a vector on
/embed that differs from /v1/embeddings, truncate ignored (413) or cutting wrongly, a
429 without Retry-After or in the wrong shape, a limit that never frees its places.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, ServeOptions, create_app  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402


class SlowHash(HashEncoder):
    def __init__(self, dim, delay):
        super().__init__(dim)
        self.delay = delay

    def encode(self, texts, *, batch_size=64):
        time.sleep(self.delay)
        return super().encode(texts, batch_size=batch_size)


def _model(enc):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    de = [" ".join(rng.choice(words, 4)) for _ in range(64)]
    return make_method("mean-centering").fit(enc.encode(de), enc.encode([s.upper() for s in de]),
                                             "de", "en")


@pytest.fixture
def serve():
    servers = []

    def start(delay=0.0, **options):
        enc = SlowHash(16, delay)
        service = EmbeddingService(enc, _model(HashEncoder(16)), label="mc")
        server = BackgroundServer(create_app(service, options=ServeOptions(**options)))
        servers.append(server)
        return server.__enter__(), service

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def post(url, path, body, **kw):
    return httpx.post(url + path, json=body, timeout=60, **kw)


def test_embed_speaks_tei(serve):
    url, service = serve()
    texts = ["hallo welt", "guten tag"]
    got = post(url, "/embed", {"inputs": texts, "language": "de"})
    assert got.status_code == 200
    vectors = np.array(got.json())  # [[float]]: a list of vectors, nothing around them
    want = service.model.meaning(HashEncoder(16).encode(texts), "de")
    np.testing.assert_allclose(vectors, want / np.linalg.norm(want, axis=1, keepdims=True),
                               atol=1e-6)  # normalize: true by default, as TEI
    raw = np.array(post(url, "/embed", {"inputs": texts, "normalize": False,
                                        "language": "de"}).json())
    openai = post(url, "/v1/embeddings", {"input": texts, "language": "de",
                                          "normalize": False}).json()
    np.testing.assert_allclose(raw, [d["embedding"] for d in openai["data"]], atol=1e-6)
    unit = post(url, "/v1/embeddings", {"input": texts, "language": "de"}).json()
    np.testing.assert_allclose(vectors, [d["embedding"] for d in unit["data"]], atol=1e-6)
    one = post(url, "/embed", {"inputs": "hallo welt", "language": "de"}).json()
    assert np.array(one).shape == (1, 16)
    assert np.array(post(url, "/", {"inputs": texts, "language": "de"}).json()).shape == (2, 16)


@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "'inputs' is required"),
    ({"inputs": []}, 400, "non-empty"),
    ({"inputs": "x", "prompt_name": "query"}, 400, "prompt_name"),
    ({"inputs": "x", "truncation_direction": "left"}, 400, "cut on the right"),
    ({"inputs": "x", "normalize": "yes"}, 400, "true or false"),
])
def test_embed_errors_take_teis_shape(serve, body, status, words):
    url, _ = serve()
    got = post(url, "/embed", body)
    assert got.status_code == status
    assert got.json()["error_type"] == "validation" and words in got.json()["error"]


def test_huggingface_inference_client(serve):
    hub = pytest.importorskip("huggingface_hub")
    url, service = serve()
    texts = ["hallo welt", "guten tag"]
    want = service.model.meaning(HashEncoder(16).encode(texts), None)
    want = want / np.linalg.norm(want, axis=1, keepdims=True)
    for address in (url + "/embed", url):  # the route, and TEI's root alias
        client = hub.InferenceClient(model=address)
        got = client.feature_extraction(texts)
        assert got.dtype == np.float32 and got.shape == (2, 16)
        np.testing.assert_allclose(got, want, atol=1e-6)
        raw = client.feature_extraction(texts, normalize=False)
        assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)


def test_truncate_cuts_to_the_limit_and_without_it_a_long_text_is_refused(serve):
    url, service = serve(max_input_tokens=3)  # hash: no tokenizer, so words
    long = "eins zwei drei vier fuenf"
    refused = post(url, "/embed", {"inputs": long, "language": "de"})
    assert refused.status_code == 413 and "has 5 words; at most 3" in refused.json()["error"]
    assert post(url, "/v1/embeddings", {"input": long, "language": "de"}).status_code == 413
    cut = np.array(post(url, "/embed", {"inputs": long, "truncate": True, "normalize": False,
                                         "language": "de"}).json())
    want = service.model.meaning(HashEncoder(16).encode(["eins zwei drei"]), "de")
    np.testing.assert_allclose(cut, want, atol=1e-6)
    openai = post(url, "/v1/embeddings", {"input": long, "truncate": True, "language": "de",
                                          "normalize": False})
    np.testing.assert_allclose([openai.json()["data"][0]["embedding"]], want, atol=1e-6)
    assert openai.json()["usage"]["prompt_tokens"] == 3


def test_auto_truncate_is_the_default_a_request_can_turn_off(serve):
    url, _ = serve(max_input_tokens=3, auto_truncate=True)
    long = "eins zwei drei vier fuenf"
    assert post(url, "/embed", {"inputs": long}).status_code == 200
    assert post(url, "/embed", {"inputs": long, "truncate": False}).status_code == 413


def test_beyond_the_concurrency_limit_a_request_gets_429_with_retry_after(serve):
    url, _ = serve(delay=0.4, max_concurrent_requests=2, max_batch=1)

    def one(i):
        path = "/embed" if i % 2 else "/v1/embeddings"
        key = "inputs" if i % 2 else "input"
        return path, post(url, path, {key: [f"text {i}"]})

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    refused = [(p, r) for p, r in results if r.status_code == 429]
    served = [r for _, r in results if r.status_code == 200]
    assert refused and len(served) >= 2 and len(refused) + len(served) == 8
    for path, r in refused:
        assert int(r.headers["Retry-After"]) >= 1
        body = r.json()
        if path == "/embed":
            assert body["error_type"] == "overloaded"
        else:
            assert body["error"]["code"] == 429 and "--max-concurrent-requests" in \
                body["error"]["message"]
    info = httpx.get(url + "/info", timeout=30).json()
    assert info["admission"]["peak"] <= 2 and info["admission"]["rejected"] == len(refused)
    assert info["admission"]["in_flight"] == 0  # every place was given back
    assert post(url, "/embed", {"inputs": "again"}).status_code == 200
    assert httpx.get(url + "/health", timeout=30).status_code == 200  # never limited


def test_a_batch_stays_within_its_token_budget(serve):
    url, service = serve(delay=0.05, max_batch=64, max_batch_tokens=8, batch_window=0.05)
    texts = [" ".join(f"w{j}" for j in range(5)) + f" r{i}" for i in range(6)]  # 6 words each

    def one(t):
        return post(url, "/embed", {"inputs": [t]}).status_code

    with ThreadPoolExecutor(6) as pool:
        assert set(pool.map(one, texts)) == {200}
    info = httpx.get(url + "/info", timeout=30).json()["batching"]
    assert info["largest_batch_tokens"] <= 8  # two 6-word requests never share a batch
    assert service.counter.calls >= 6


def test_two_encode_workers_give_every_request_the_vectors_of_one(serve):
    """``encode_workers=2`` (two batches encoding at once): 24 concurrent requests get the
    same vectors as the library's meaning of each text alone."""
    (url, service) = serve(delay=0.02, encode_workers=2, max_batch=4)
    texts = [f"w{i} w{i + 1} w{i + 2}" for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda t: httpx.post(f"{url}/v1/embeddings", json={
            "input": [t], "model": "mc", "language": "de"}, timeout=30).json(), texts))
    want = service.model.meaning(service.encoder.encode(texts), "de")
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    for row, expected in zip(got, want, strict=True):
        vec = np.asarray(row["data"][0]["embedding"])
        np.testing.assert_allclose(vec / np.linalg.norm(vec), expected, atol=1e-6)
    assert httpx.get(f"{url}/info", timeout=10).json()["encode_workers"] == 2
