"""Issue 48: the service's weak cases from the probe, each on a live server or at startup.

Bugs feared: ``encoding_format`` of ``""``, ``0`` or ``false`` silently meaning float; a
4xx body that echoes megabytes of the request back; ``HEAD /health`` answering 405; an API
key with a trailing newline that never matches (no warning), one with a character HTTP
cannot carry accepted at startup and never matching; ``--port 0`` never saying which port
it bound.
"""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.exceptions import ConfigError  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving import app as app_module  # noqa: E402
from disembed.serving.app import (  # noqa: E402
    BackgroundServer,
    ServeOptions,
    bind,
    create_app,
    run_server,
)
from disembed.serving.requests import Limits  # noqa: E402
from disembed.serving.responses import MAX_MESSAGE  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

E = "/v1/embeddings"
BIG = "x" * 3_000_000  # the probe's 3 MB


@pytest.fixture(scope="module")
def url():
    service = EmbeddingService(HashEncoder(16), make_method("mean-centering").fit(
        HashEncoder(16).encode([f"a{i}" for i in range(8)]),
        HashEncoder(16).encode([f"b{i}" for i in range(8)]), "de", "en"), label="m")
    limits = Limits(max_body_bytes=8 << 20, max_chars=4_000_000, max_total_chars=4_000_000)
    with BackgroundServer(create_app(service, limits=limits)) as address:
        yield address


@pytest.mark.parametrize("fmt", ["", 0, False, None])
def test_encoding_format_that_names_no_format_is_refused(url, fmt):
    got = httpx.post(url + E, json={"input": "hallo", "encoding_format": fmt}, timeout=30)
    if fmt is None:  # JSON null: left out, float
        assert got.status_code == 200 and isinstance(got.json()["data"][0]["embedding"], list)
        return
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == "encoding_format" and "('float', 'base64')" in error["message"]


@pytest.mark.parametrize("path, body, param", [
    (E, {"input": "x", "encoding_format": BIG}, "encoding_format"),
    (E, {"input": "x", "model": BIG}, "model"),
    (E, {"input": "x", "language": BIG}, "language"),
    (E, {"input": "x", "language": [BIG]}, "language"),
    (E, {"input": "x", "dimensions": BIG}, "dimensions"),
    (E, {"input": "x", "truncate": BIG}, "truncate"),
    (E, {"input": "x", "view": BIG}, "view"),
    ("/v1/similarity", {"pairs": [["a", "b"]], "languages": [BIG, "de"]}, "languages"),
    ("/embed", {"inputs": "x", "truncation_direction": BIG}, "truncation_direction"),
    ("/embed", {"inputs": "x", "normalize": BIG}, "normalize"),
])
def test_an_error_never_echoes_more_than_a_short_prefix(url, path, body, param):
    got = httpx.post(url + path, json=body, timeout=60)
    assert 400 <= got.status_code < 500, got.text[:300]
    assert len(got.content) < MAX_MESSAGE + 200, (param, len(got.content))
    message = got.json()["error"]
    message = message["message"] if isinstance(message, dict) else message
    assert "x" * 200 not in message and param in message


def test_a_long_message_is_cut_in_its_middle_keeping_the_hint():
    from disembed.serving.responses import error_body

    body = error_body(400, "start " + "y" * 10_000 + " the hint")["error"]["message"]
    assert body.startswith("start ") and body.endswith(" the hint") and len(body) < 700


def test_head_health_answers_200_without_a_body(url):
    got = httpx.head(url + "/health", timeout=30)
    assert got.status_code == 200 and got.content == b""
    assert httpx.get(url + "/health", timeout=30).json() == {"status": "ok"}


def test_a_key_with_whitespace_is_stripped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="disembed.serving.app"):
        options = ServeOptions(api_key="  s3cret\n")
    assert options.api_key == "s3cret"
    assert any("stripped" in r.getMessage() for r in caplog.records)
    service = EmbeddingService(HashEncoder(16), make_method("baseline"), label="m")
    with BackgroundServer(create_app(service, options=options)) as address:
        ok = httpx.post(address + E, json={"input": "x"}, timeout=30,
                        headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert httpx.post(address + E, json={"input": "x"}, timeout=30).status_code == 401


@pytest.mark.parametrize("key, fragment", [
    ("ключ", "U+043A at character 0"), ("key€", "U+20AC"), ("a\tb", "U+0009"),
    ("   ", "empty or whitespace"), ("\n", "empty or whitespace")])
def test_a_key_no_client_could_send_is_refused_at_startup(key, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("+", r"\+")):
        ServeOptions(api_key=key)


def test_the_env_key_is_checked_too(monkeypatch):
    monkeypatch.setenv(app_module.API_KEY_ENV, "k\n")
    assert app_module.api_key_from_env() == "k"
    monkeypatch.setenv(app_module.API_KEY_ENV, "ключ")
    with pytest.raises(ConfigError, match="Latin-1"):
        app_module.api_key_from_env()


def test_cli_refuses_a_bad_key_before_it_binds_or_loads(capsys):
    from disembed.cli import main

    assert main(["serve", "--encoder", "hash:16", "--port", "0", "--api-key", "k€y"]) == 2
    assert "U+20AC" in capsys.readouterr().err


def test_port_0_logs_the_port_it_bound(monkeypatch, caplog):
    seen = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: seen.update(
        port=self.config.port, sockets=sockets))
    sock = bind("127.0.0.1", 0)
    try:
        with caplog.at_level(logging.INFO, logger="disembed.serving.app"):
            run_server(object(), "127.0.0.1", 0, sock=sock)
        port = sock.getsockname()[1]
    finally:
        sock.close()
    assert port != 0 and seen == {"port": port, "sockets": [sock]}
    said = [r for r in caplog.records if "serving on" in r.getMessage()]
    assert said and said[0].levelno == logging.WARNING  # shown even with --quiet
    assert said[0].getMessage() == f"serving on http://127.0.0.1:{port}"
