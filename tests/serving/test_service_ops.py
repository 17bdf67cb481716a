"""What operators expect of the service: model list, info, metrics, API key, CORS, OpenAPI
schemas, JSON access logs; 4xx for client mistakes and 503 for its own resource failures.
All through the real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import os
import stat
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, ServeOptions, create_app  # noqa: E402
from disembed.serving.loading import load_service  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

KEY = "s3cret-key"


def fitted(name="seed"):
    enc = HashEncoder(16)
    rng = np.random.default_rng(0)
    de = [f"satz {i} {rng.integers(100)}" for i in range(64)]
    en = [s.upper() for s in de]
    params = {"max_epochs": 1, "batch_size": 32} if name.startswith("seed") else {}
    return enc, make_method(name, **params).fit(enc.encode(de), enc.encode(en), "de", "en")


@pytest.fixture(scope="module")
def server():
    enc, model = fitted()
    service = EmbeddingService(enc, model, label="models/seed-e5")
    app = create_app(service, options=ServeOptions(max_batch=32, batch_window=0.01,
                                                   cors_origins=("https://app.example",)))
    with BackgroundServer(app) as url:
        yield url, service


@pytest.fixture(scope="module")
def keyed():
    enc, model = fitted()
    app = create_app(EmbeddingService(enc, model, label="m"),
                     options=ServeOptions(api_key=KEY, cors_origins=("*",)))
    with BackgroundServer(app) as url:
        yield url


def test_models_lists_one_id_per_view_and_requests_are_checked_against_it(server):
    url, service = server
    listed = httpx.get(url + "/v1/models").json()
    assert listed["object"] == "list"
    assert [(m["id"], m["view"]) for m in listed["data"]] == [
        ("seed-e5", "meaning"), ("seed-e5:language", "language"), ("seed-e5:raw", "raw")]
    r = httpx.post(url + "/v1/embeddings", json={"input": ["hallo"], "model": "seed-e5:raw"})
    assert r.status_code == 200 and r.json()["model"] == "seed-e5:raw"
    np.testing.assert_allclose(r.json()["data"][0]["embedding"],
                               HashEncoder(16).encode(["hallo"])[0], atol=1e-6)
    bad = httpx.post(url + "/v1/embeddings", json={"input": ["a"], "model": "gpt-4"})
    assert bad.status_code == 404 and "'seed-e5'" in bad.json()["error"]["message"]
    assert bad.json()["error"]["param"] == "model"


def test_info_names_the_recipe_its_settings_and_the_encoder(server):
    url, service = server
    info = httpx.get(url + "/info").json()
    assert info["model_id"] == "seed-e5" and info["method"] == "seed"
    assert info["params"]["max_epochs"] == 1 and info["encoder_identity"]["backend"] == "hash"
    assert info["languages"] == ["de", "en"] and info["max_batch"] == 32
    assert info["auth"] is False and info["cors_origins"] == ["https://app.example"]


def test_metrics_count_requests_latency_batches_and_cache(server):
    url, _ = server
    for _ in range(3):
        httpx.post(url + "/v1/embeddings", json={"input": ["eins", "zwei"]})
    httpx.post(url + "/v1/embeddings", json={"input": []})
    text = httpx.get(url + "/metrics").text
    assert 'disembed_requests_total{endpoint="/v1/embeddings",status="200"}' in text
    assert 'disembed_requests_total{endpoint="/v1/embeddings",status="400"} 1' in text
    assert 'disembed_request_duration_seconds_bucket{endpoint="/v1/embeddings",le="+Inf"}' \
        in text
    assert "# TYPE disembed_batch_texts histogram" in text
    assert 'disembed_request_inputs_bucket{le="2"}' in text
    counts = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line and not line.startswith("#")}
    assert counts['disembed_requests_total{endpoint="/v1/embeddings",status="200"}'] >= 3
    assert counts["disembed_batch_requests_count"] >= 1
    assert counts["disembed_encoder_calls_total"] >= 1


def test_cache_hits_are_counted(tmp_path):
    enc, model = fitted("mean-centering")
    model.save(tmp_path / "m", metadata={"encoder": enc.identity.to_dict()})
    service = load_service(tmp_path / "m", cache_dir=tmp_path / "cache")
    with BackgroundServer(create_app(service)) as url:
        for _ in range(2):
            httpx.post(url + "/v1/embeddings", json={"input": ["a b", "c d"], "language": "de"})
        text = httpx.get(url + "/metrics").text
    assert "disembed_cache_lookups_total 4" in text and "disembed_cache_hits_total 2" in text


def test_api_key_is_required_everywhere_but_health(keyed):
    url = keyed
    assert httpx.get(url + "/health").status_code == 200
    for method, path in (("post", "/v1/embeddings"), ("get", "/v1/models"), ("get", "/info"),
                         ("get", "/metrics")):
        r = getattr(httpx, method)(url + path, **({"json": {"input": "x"}}
                                                  if method == "post" else {}))
        assert r.status_code == 401, path
        assert "Authorization: Bearer" in r.json()["error"]["message"]
        assert r.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(url + "/v1/embeddings", json={"input": "x"},
                       headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = httpx.post(url + "/v1/embeddings", json={"input": "x"},
                    headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200


def test_official_openai_client_with_the_key(keyed):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=keyed + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in client.models.list().data][0] == "m"
    assert len(client.embeddings.create(input=["hallo"], model="m").data[0].embedding) == 16
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=keyed + "/v1", api_key="wrong", max_retries=0).models.list()


def test_cors_allows_only_the_given_origins(server, keyed):
    url, _ = server
    pre = httpx.options(url + "/v1/embeddings", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
    assert pre.headers["access-control-allow-origin"] == "https://app.example"
    other = httpx.post(url + "/v1/embeddings", json={"input": "x"},
                       headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    # the preflight of a keyed service passes without the key; the 401 carries CORS headers
    pre = httpx.options(keyed + "/v1/embeddings", headers={
        "Origin": "https://a.example", "Access-Control-Request-Method": "POST"})
    assert pre.status_code == 200
    denied = httpx.post(keyed + "/v1/embeddings", json={"input": "x"},
                        headers={"Origin": "https://a.example"})
    assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == "*"


def test_openapi_documents_request_and_response_bodies(server):
    url, _ = server
    doc = httpx.get(url + "/openapi.json").json()
    post = doc["paths"]["/v1/embeddings"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert {"input", "model", "language", "encoding_format"} <= set(body["properties"])
    assert body["required"] == ["input"]
    assert set(post["responses"]) >= {"200", "400", "401", "404", "413", "503"}
    assert "EmbeddingsResponse" in json.dumps(post["responses"]["200"])
    assert "/v1/models" in doc["paths"] and "/metrics" in doc["paths"]


@pytest.mark.parametrize("body, status, words", [
    ({"input": [[101, 2023, 102]]}, 400, "holds token ids"),
    ({"input": [1, 2, 3]}, 400, "holds token ids"),
    ({"input": "x", "dimensions": 8}, 400, "exactly 16 dimensions"),
    ({"input": "x", "view": "colour"}, 400, "'view' must be one of"),
    ({"input": "x", "model": 5}, 400, "'model' must be a string"),
])
def test_client_mistakes_say_what_is_supported(server, body, status, words):
    url, _ = server
    r = httpx.post(url + "/v1/embeddings", json=body)
    assert r.status_code == status and words in r.json()["error"]["message"]


def test_dimensions_equal_to_the_size_is_accepted(server):
    url, _ = server
    r = httpx.post(url + "/v1/embeddings", json={"input": "x", "dimensions": 16})
    assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == 16


def test_lone_surrogate_is_a_400_not_a_500(server):
    url, _ = server
    raw = b'{"input": ["ok \\ud800 broken"]}'
    r = httpx.post(url + "/v1/embeddings", content=raw, headers={"content-type":
                                                                 "application/json"})
    assert r.status_code == 400 and "lone surrogate (U+D800)" in r.json()["error"]["message"]
    pair = b'{"input": ["emoji \\ud83d\\ude42"]}'  # a proper surrogate pair is fine
    assert httpx.post(url + "/v1/embeddings", content=pair,
                      headers={"content-type": "application/json"}).status_code == 200


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_read_only_cache_is_a_503_with_the_reason(tmp_path):
    enc, model = fitted("mean-centering")
    model.save(tmp_path / "m", metadata={"encoder": enc.identity.to_dict()})
    cache = tmp_path / "cache"
    service = load_service(tmp_path / "m", cache_dir=cache)
    for path in [cache, *cache.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        with BackgroundServer(create_app(service)) as url:
            r = httpx.post(url + "/v1/embeddings", json={"input": "neu", "language": "de"})
    finally:
        for path in [cache, *cache.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    assert r.status_code == 503
    assert "--no-cache" in r.json()["error"]["message"]


def test_resource_failure_of_the_encoder_is_a_503(monkeypatch):
    """Whatever the OS refuses (read-only cache, full disk) is the service's fault: 503."""
    enc, model = fitted()

    class ReadOnly(HashEncoder):
        def encode(self, texts, *, batch_size=64):
            raise PermissionError(13, "Permission denied", "/cache/shard-0.npy")

    service = EmbeddingService(ReadOnly(16), model, label="m")
    with BackgroundServer(create_app(service)) as url:
        r = httpx.post(url + "/v1/embeddings", json={"input": "x"})
    assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"
    assert "/cache/shard-0.npy: permission denied" in r.json()["error"]["message"]


def test_access_log_is_one_json_line_per_request(server, caplog):
    url, _ = server
    with caplog.at_level(logging.INFO, logger="disembed.serving.access"):
        httpx.post(url + "/v1/embeddings", json={"input": ["a", "b", "c"]})
        # the line is written once the response has gone out, so the client can read the
        # response a moment before the server thread logs it: wait for it (2 s at most)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not any(
                r.name == "disembed.serving.access" for r in caplog.records):
            time.sleep(0.01)
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "disembed.serving.access"]
    assert lines and lines[-1]["path"] == "/v1/embeddings" and lines[-1]["status"] == 200
    assert lines[-1]["inputs"] == 3 and lines[-1]["ms"] > 0
