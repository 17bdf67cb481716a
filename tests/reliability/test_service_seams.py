"""Issue 33: the service at its edges: bodies read within a size and a time limit however they
are sent, only JSON accepted, every error in OpenAI's shape, one client's bad text kept to
itself, served ids that are view names, and ``serve`` failing fast on a port in use."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, ServeOptions, create_app  # noqa: E402
from disembed.serving.intake import read_json  # noqa: E402
from disembed.serving.requests import Limits  # noqa: E402
from disembed.serving.service import EmbeddingService, ServiceError  # noqa: E402

E = "/v1/embeddings"
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def url():
    service = EmbeddingService(HashEncoder(16), make_method("baseline"), label="m")
    app = create_app(service, limits=Limits(max_body_bytes=4096, body_timeout=0.5))
    with BackgroundServer(app) as address:
        yield address


def _error(r, status: int, fragment: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert fragment in error["message"], error
    assert error["code"] == status and error["type"] == "invalid_request_error"


@pytest.mark.parametrize("method, path, status, fragment", [
    ("GET", "/no/such/path", 404, "no such path /no/such/path"),
    ("POST", "/v1/embedding", 404, "no such path"),
    ("GET", E, 405, "/v1/embeddings does not take GET; allowed: POST"),
    ("DELETE", "/v1/models", 405, "does not take DELETE"),
])
def test_unknown_paths_and_methods_answer_in_the_openai_error_shape(url, method, path,
                                                                    status, fragment):
    _error(httpx.request(method, url + path, timeout=30), status, fragment)


@pytest.mark.parametrize("headers, body", [
    ({"content-type": "text/plain"}, b'{"input": "x"}'),
    ({"content-type": "application/x-www-form-urlencoded"}, b'{"input": "x"}'),
    ({}, b'{"input": "x"}'),
], ids=["text-plain", "form", "none"])
def test_only_a_json_body_is_read(url, headers, body):
    """A web page can send text/plain or a form to a local keyless service without asking
    (no CORS preflight); never application/json."""
    _error(httpx.post(url + E, content=body, headers=headers, timeout=30), 415,
           "'Content-Type: application/json'")
    assert httpx.post(url + E, content=body, timeout=30,
                      headers={"content-type": "application/json; charset=utf-8"}
                      ).status_code == 200


def test_deeply_nested_json_is_a_400_not_a_500(url):
    body = b'{"input": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    _error(httpx.post(url + E, content=body, headers=JSON, timeout=30), 400,
           "nested too deeply")


def test_a_chunked_body_over_the_limit_is_refused(url):
    def chunks():
        yield b'{"input": "'
        for _ in range(64):
            yield b"x" * 1024
        yield b'"}'

    _error(httpx.post(url + E, content=chunks(), headers=JSON, timeout=30), 413,
           "more than 4096 bytes")


class _Request:
    """A request whose body arrives in ``chunks``, counting what was read."""

    def __init__(self, chunks, pause: float = 0.0):
        self.headers = {"content-type": "application/json"}
        self.chunks, self.pause, self.read = chunks, pause, 0

    async def stream(self):
        for chunk in self.chunks:
            if self.pause:
                await asyncio.sleep(self.pause)
            self.read += 1
            yield chunk


def test_a_chunked_body_stops_being_read_at_the_limit():
    """300 MB of chunks were read whole before the limit applied (issue 33)."""
    request = _Request([b"x" * 1024] * 10_000)
    with pytest.raises(ServiceError) as caught:
        asyncio.run(read_json(request, Limits(max_body_bytes=8192)))
    assert caught.value.status == 413 and request.read == 9


def test_a_body_that_does_not_arrive_in_time_is_a_408():
    request = _Request([b'{"input":', b' "x"}'], pause=0.3)
    with pytest.raises(ServiceError) as caught:
        asyncio.run(read_json(request, Limits(body_timeout=0.2)))
    assert caught.value.status == 408 and "did not arrive within 0.2 s" in caught.value.message


def test_a_slow_sender_gets_a_408_on_the_wire(url):
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"input\":")
        answer = b""
        while b"}}" not in answer and (chunk := conn.recv(4096)):
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 408") and "did not arrive within 0.5 s" in answer


# --- one client's bad text stays its own --------------------------------------------------

def test_one_clients_bad_text_neither_fails_nor_reaches_the_others_in_its_batch(tmp_path):
    """An npy: encoder embeds only its own texts; three requests share one micro-batch (a
    long window), one of them with a text it lacks."""
    from disembed import load_encoder

    np.save(tmp_path / "e.npy", np.eye(3, 8, dtype=np.float32))
    (tmp_path / "e.txt").write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    service = EmbeddingService(load_encoder(f"npy:{tmp_path / 'e.npy'}"),
                               make_method("baseline"))
    app = create_app(service, options=ServeOptions(batch_window=0.5))
    bodies = [{"input": ["eins", "zwei"]}, {"input": "secret of client B"},
              {"input": ["drei"]}]
    with BackgroundServer(app) as url:
        answers = [None] * 3

        def post(i):
            answers[i] = httpx.post(url + E, json=bodies[i], timeout=30)

        threads = [threading.Thread(target=post, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
            time.sleep(0.02)
        for t in threads:
            t.join()
        assert app.state.batcher.stats.largest == 3  # they did share one batch
    assert [a.status_code for a in answers] == [200, 400, 200]
    assert "secret of client B" in answers[1].json()["error"]["message"]
    assert "secret" not in answers[0].text + answers[2].text
    np.testing.assert_allclose(answers[2].json()["data"][0]["embedding"],
                               np.eye(3, 8)[2], atol=1e-6)


# --- served ids that are view names --------------------------------------------------------

@pytest.mark.parametrize("name", ["raw", "language", "meaning"])
def test_a_model_named_like_a_view_serves_its_meaning_under_its_name(name, caplog):
    enc = HashEncoder(16)
    rng = np.random.default_rng(0)
    de = [f"satz {i} {rng.integers(100)}" for i in range(30)]
    model = make_method("mean-centering").fit(enc.encode(de), enc.encode(de[::-1]), "de", "en")
    service = EmbeddingService(enc, model, label=f"models/{name}")
    with caplog.at_level(logging.WARNING):
        app = create_app(service)
    assert f"the served model id {name!r} is also a view name" in caplog.text
    raw = enc.encode(["hallo"])
    with BackgroundServer(app) as url:
        def vector(model_id):
            r = httpx.post(url + E, json={"input": "hallo", "model": model_id,
                                          "language": "de", "normalize": False}, timeout=30)
            assert r.status_code == 200, r.text
            return np.array(r.json()["data"][0]["embedding"])

        np.testing.assert_allclose(vector(name), model.meaning(raw, "de")[0], atol=1e-5)
        np.testing.assert_allclose(vector(f"{name}:raw"), raw[0], atol=1e-5)
        np.testing.assert_allclose(vector(f"{name}:language"), model.language(raw, "de")[0],
                                   atol=1e-5)


# --- serve: the port first, a warning when exposed -----------------------------------------

def test_serve_refuses_a_port_in_use_before_loading_the_model(monkeypatch, capsys):
    import disembed.cli.serve as serve_cli
    from disembed.cli import main

    loaded = []
    monkeypatch.setattr(serve_cli, "load_service", lambda *a, **k: loaded.append(a))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--model", "no-model-needed", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"port {port} on 127.0.0.1 is in use" in err, err
    assert loaded == []


@pytest.mark.parametrize("host, key, warned", [
    ("0.0.0.0", None, True), ("0.0.0.0", "k", False), ("127.0.0.1", None, False),
    ("localhost", None, False),
])
def test_serve_warns_when_it_listens_beyond_this_machine_without_a_key(
        host, key, warned, monkeypatch, caplog):
    import disembed.cli.serve as serve_cli
    from disembed.cli import main

    monkeypatch.delenv("DISEMBED_API_KEY", raising=False)
    ran = []
    monkeypatch.setattr(serve_cli, "run_server", lambda app, *a, sock=None, **k:
                        (ran.append(sock.getsockname()), sock.close()))
    argv = ["serve", "--encoder", "hash:8", "--no-cache", "--host", host, "--port", "0"]
    with caplog.at_level(logging.WARNING):
        assert main(argv + (["--api-key", key] if key else [])) == 0
    assert ran and ("without an API key" in caplog.text) == warned
