"""``disembed serve``: the real uvicorn server on 127.0.0.1, called with httpx and openai."""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, create_app  # noqa: E402
from disembed.serving.loading import load_service  # noqa: E402
from disembed.serving.requests import Limits  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402


class SlowHash(HashEncoder):
    """The hash encoder with a fixed cost per call, so concurrent requests overlap."""

    def encode(self, texts, *, batch_size=64):
        time.sleep(0.05)
        return super().encode(texts, batch_size=batch_size)


def _fit(name: str, enc: HashEncoder):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    de = [" ".join(rng.choice(words, 4)) for _ in range(64)]
    en = [s.upper() for s in de]
    params = {"max_epochs": 1, "batch_size": 32} if name.startswith("seed") else {}
    return make_method(name, **params).fit(enc.encode(de), enc.encode(en), "de", "en")


@pytest.fixture(scope="module")
def servers():
    """Two live servers: SEED (no language needed) and mean-centering (language needed)."""
    enc = SlowHash(dim=16)
    limits = Limits(max_inputs=8, max_chars=200, max_total_chars=1000)
    out = {}
    stack = []
    for name in ("seed", "mean-centering"):
        service = EmbeddingService(enc, _fit(name, enc), label=name)
        server = BackgroundServer(create_app(service, limits=limits, max_batch=64,
                                             batch_window=0.02))
        out[name] = (server.__enter__(), service)
        stack.append(server)
    yield out
    for server in stack:
        server.__exit__(None, None, None)


def post(url, path, body):
    return httpx.post(url + path, json=body, timeout=30)


def test_embeddings_follow_openai_shape_and_return_the_meaning_part(servers):
    url, service = servers["seed"]
    texts = ["guten morgen", "good morning"]
    r = post(url, "/v1/embeddings", {"input": texts, "model": "meaning", "normalize": False})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"object", "data", "model", "usage"} and body["object"] == "list"
    assert body["model"] == "seed" and body["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    assert [(d["object"], d["index"]) for d in body["data"]] == [("embedding", 0), ("embedding", 1)]
    want = service.model.meaning(HashEncoder(16).encode(texts), "de")
    np.testing.assert_allclose([d["embedding"] for d in body["data"]], want, atol=1e-6)


def test_views_base64_and_single_string(servers):
    url, service = servers["seed"]
    raw = post(url, "/v1/embeddings", {"input": "hallo", "model": "raw"}).json()
    np.testing.assert_allclose(raw["data"][0]["embedding"], HashEncoder(16).encode(["hallo"])[0],
                               atol=1e-6)
    floats = post(url, "/v1/embeddings", {"input": ["hallo"], "model": "language"}).json()
    b64 = post(url, "/v1/embeddings", {"input": ["hallo"], "model": "language",
                                       "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(decoded, np.float32(floats["data"][0]["embedding"]))


@pytest.mark.parametrize("body, status, words", [
    ({"input": ["a"], "model": "text-embedding-3-small"}, 404, "'seed', 'seed:language'"),
    ({"input": [""]}, 400, "empty"),
    ({"input": [3]}, 400, "holds token ids"),
    ({"input": ["a", 3]}, 400, "is int"),
    ({"input": []}, 400, "non-empty"),
    ({"model": "meaning"}, 400, "'input' is required"),
    ({"input": ["a"] * 9}, 413, "at most 8"),
    ({"input": ["x" * 201]}, 413, "at most 200"),
    ({"input": ["x" * 150] * 7}, 413, "1050 characters"),
    ({"input": ["a"], "encoding_format": "int8"}, 400, "encoding_format"),
    (["not", "an", "object"], 400, "JSON object"),
])
def test_bad_requests_get_json_errors(servers, body, status, words):
    url, _ = servers["seed"]
    r = post(url, "/v1/embeddings", body)
    assert r.status_code == status
    error = r.json()["error"]
    assert words in error["message"] and error["type"] == "invalid_request_error"


def test_invalid_json_is_a_400(servers):
    url, _ = servers["seed"]
    r = httpx.post(url + "/v1/embeddings", content=b"{nope", timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


def test_language_dependent_method_takes_or_predicts_the_language(servers):
    url, service = servers["mean-centering"]
    r = post(url, "/v1/embeddings", {"input": ["hallo"]})  # predicted by the model
    assert r.status_code == 200 and r.json()["data"][0]["language_predicted"] is True
    texts = ["hallo welt", "hello world"]
    r = post(url, "/v1/embeddings", {"input": texts, "language": ["de", "en"],
                                     "normalize": False})
    assert r.status_code == 200
    raw = HashEncoder(16).encode(texts)
    want = np.stack([service.model.meaning(raw[:1], "de")[0],
                     service.model.meaning(raw[1:], "en")[0]])
    np.testing.assert_allclose([d["embedding"] for d in r.json()["data"]], want, atol=1e-6)
    assert post(url, "/v1/embeddings", {"input": texts, "language": ["de"]}).status_code == 400


def test_similarity_and_qe_are_cosines_of_the_meaning_parts(servers):
    url, service = servers["mean-centering"]
    pairs = [["hallo welt", "hello world"], ["katze", "a dog"]]
    body = {"pairs": pairs, "languages": ["de", "en"]}
    sim = post(url, "/v1/similarity", body).json()
    qe = post(url, "/v1/qe", body).json()
    enc = HashEncoder(16)
    a = service.model.meaning(enc.encode([p[0] for p in pairs]), "de")
    b = service.model.meaning(enc.encode([p[1] for p in pairs]), "en")
    want = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose([d["similarity"] for d in sim["data"]], want, atol=1e-6)
    np.testing.assert_allclose([d["score"] for d in qe["data"]], want, atol=1e-6)
    assert post(url, "/v1/qe", {"pairs": pairs}).status_code == 200  # languages predicted
    assert post(url, "/v1/qe", {"pairs": [["only one"]]}).status_code == 400


def test_health_is_minimal_and_info_holds_the_configuration(servers):
    """As TEI: /health says alive and nothing else; /info has the model, limits, batching."""
    url, _ = servers["mean-centering"]
    assert httpx.get(url + "/health", timeout=30).json() == {"status": "ok"}
    info = httpx.get(url + "/info", timeout=30).json()
    assert info["method"] == "mean-centering" and info["needs_language"]
    assert info["views"] == ["meaning", "language", "raw"] and info["dim"] == 16
    assert info["max_concurrent_requests"] == 64 and info["max_batch_tokens"] == 16384
    assert info["max_client_batch_size"] == info["limits"]["max_inputs"]
    assert info["token_unit"] == "words" and "batching" in info and "admission" in info


def test_concurrent_requests_are_micro_batched(servers):
    url, service = servers["seed"]
    calls_before = service.counter.calls
    texts = [[f"sentence {i} a", f"sentence {i} b"] for i in range(16)]

    def one(t):
        return post(url, "/v1/embeddings", {"input": t, "model": "raw"}).json()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, texts))
    calls = service.counter.calls - calls_before
    assert calls < 16, f"16 concurrent requests took {calls} encoder calls"
    enc = HashEncoder(16)
    for t, res in zip(texts, results, strict=True):  # every request got its own rows back
        np.testing.assert_allclose([d["embedding"] for d in res["data"]], enc.encode(t),
                                   atol=1e-6)
    batching = httpx.get(url + "/info", timeout=30).json()["batching"]
    assert batching["largest_batch"] > 1


def test_official_openai_client(servers):
    openai = pytest.importorskip("openai")
    url, service = servers["mean-centering"]
    client = openai.OpenAI(base_url=url + "/v1", api_key="dummy", max_retries=0)
    texts = ["hallo welt", "guten tag"]
    resp = client.embeddings.create(input=texts, model="meaning", extra_body={"language": "de"})
    got = np.array([d.embedding for d in resp.data])
    want = service.model.meaning(HashEncoder(16).encode(texts), "de")
    np.testing.assert_allclose(got, want / np.linalg.norm(want, axis=1, keepdims=True),
                               atol=1e-6)  # unit length, as OpenAI's
    assert resp.model == "mean-centering" and resp.usage.prompt_tokens == 4
    with pytest.raises(openai.BadRequestError, match="unknown language code"):
        client.embeddings.create(input=texts, model="meaning",
                                 extra_body={"language": "xx-nonsense"})


def test_load_service_wraps_the_cache_and_checks_the_encoder(tmp_path):
    enc = HashEncoder(16)
    model = _fit("mean-centering", enc)
    model.save(tmp_path / "m", metadata={"encoder": enc.identity.to_dict()})
    service = load_service(tmp_path / "m", cache_dir=tmp_path / "cache")
    assert service.encoder.name == "hash:16" and service.needs_language
    service.encode(["eins", "zwei"])
    assert len(service.encoder.store) == 2  # the embedding cache sits behind the service
    from disembed.exceptions import ConfigError

    with pytest.raises(ConfigError, match="was trained on encoder .* but this run uses hash:32"):
        load_service(tmp_path / "m", "hash:32", use_cache=False)
    bare = load_service(None, "hash:8", use_cache=False)
    assert bare.views == ["meaning", "raw"] and not bare.needs_language


def test_cli_serve_builds_the_app_with_its_limits(monkeypatch):
    import disembed.cli.serve as serve_cli
    from disembed.cli import main

    started = {}
    monkeypatch.setattr(serve_cli, "run_server",
                        lambda app, host, port, level, sock=None:
                        started.update(app=app, port=port))
    assert main(["serve", "--encoder", "hash:8", "--no-cache", "--port", "9123",
                 "--max-inputs", "3"]) == 0
    app = started["app"]
    assert started["port"] == 9123 and app.state.limits.max_inputs == 3
    assert app.state.service.views == ["meaning", "raw"]


def test_load_service_rebuilds_an_st_encoder_from_its_identity(tmp_path):
    pytest.importorskip("sentence_transformers")
    from test_export import _pairs, build_tiny_bert

    from disembed import load_encoder

    folder = build_tiny_bert(tmp_path / "tiny")  # not tmp_path: its checksum covers subfolders

    enc = load_encoder(f"st:{folder}", pooling="cls", prefix="passage: ")
    de, en = _pairs(40)
    model = make_method("mean-centering").fit(enc.encode(de), enc.encode(en), "de", "en")
    model.save(tmp_path / "m", metadata={"encoder": enc.identity.to_dict()})
    service = load_service(tmp_path / "m", use_cache=False)
    assert service.encoder.identity == enc.identity
    np.testing.assert_allclose(service.encode(["hallo welt"]), enc.encode(["hallo welt"]),
                               atol=1e-6)


def test_a_centred_head_needs_the_language_and_a_raw_head_does_not():
    """seed-centered subtracts mu_lang before its head: without the language its meaning
    part would silently use the batch mean instead."""
    enc = HashEncoder(16)
    assert _fit("seed-centered", enc).uses_language
    assert not _fit("seed", enc).uses_language
    for method in ("lsar", "leace", "baseline"):  # they need no language: serve asks none
        service = EmbeddingService(enc, _fit(method, enc))
        assert not service.needs_language
        assert service.languages_for(2, None, "language") == [None, None]
        raw = enc.encode(["a b", "c d"])  # served without a language: no 400
        np.testing.assert_allclose(service.view(raw, "meaning", [None, None]),
                                   service.model.meaning(raw, None), atol=1e-6)
