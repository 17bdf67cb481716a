"""The service's bad-input table: every client mistake is a 4xx that says what was wrong,
every failure of the service's own resources a 503 with the reason; never a 500.

Each row posts a raw body to the real uvicorn server on 127.0.0.1 (hash encoder).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, create_app  # noqa: E402
from disembed.serving.requests import Limits  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

E = "/v1/embeddings"
ROWS = [
    # (id, path, raw JSON body, status, fragment of the message)
    ("lone-surrogate", E, r'{"input": ["a \ud800 b"]}', 400, "lone surrogate (U+D800)"),
    ("lone-low-surrogate", E, r'{"input": "x \udc00"}', 400, "lone surrogate (U+DC00)"),
    ("surrogate-in-pair", "/v1/similarity", r'{"pairs": [["a", "\ud800"]]}', 400,
     "lone surrogate"),
    ("token-ids", E, '{"input": [[1, 2, 3]]}', 400, "holds token ids"),
    ("flat-token-ids", E, '{"input": [1, 2, 3]}', 400, "holds token ids"),
    ("dimensions", E, '{"input": "x", "dimensions": 4}', 400, "exactly 16 dimensions"),
    ("unknown-model", E, '{"input": "x", "model": "text-embedding-3-small"}', 404,
     "is not served here"),
    ("model-not-string", E, '{"input": "x", "model": ["a"]}', 400, "must be a string"),
    ("empty-input", E, '{"input": []}', 400, "non-empty"),
    ("whitespace-input", E, '{"input": ["  "]}', 400, "empty, whitespace"),
    ("no-input", E, '{}', 400, "'input' is required"),
    ("not-json", E, "{nope", 400, "not valid JSON"),
    ("not-object", E, "[1]", 400, "JSON object"),
    ("too-many", E, '{"input": ["a", "b", "c", "d", "e"]}', 413, "at most 4"),
    ("bad-format", E, '{"input": "x", "encoding_format": "int8"}', 400, "encoding_format"),
    ("bad-language-type", E, '{"input": "x", "language": 5}', 400, "language code"),
    ("pairs-not-pairs", "/v1/qe", '{"pairs": [["only one"]]}', 400, "two strings"),
]


@pytest.fixture(scope="module")
def url():
    enc = HashEncoder(16)
    rng = np.random.default_rng(0)
    de = [f"satz {i} {rng.integers(100)}" for i in range(40)]
    model = make_method("seed", max_epochs=1, batch_size=32).fit(
        enc.encode(de), enc.encode([s.upper() for s in de]), "de", "en")
    app = create_app(EmbeddingService(enc, model, label="m"), limits=Limits(max_inputs=4))
    with BackgroundServer(app) as address:
        yield address


@pytest.mark.parametrize("row_id, path, body, status, fragment", ROWS, ids=[r[0] for r in ROWS])
def test_client_mistake_is_a_clear_4xx(url, row_id, path, body, status, fragment):
    r = httpx.post(url + path, content=body.encode(), timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert fragment in error["message"], error
    assert error["type"] == "invalid_request_error" and error["code"] == status


class Failing(HashEncoder):
    """An encoder whose storage fails as a read-only or full cache does."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(16)
        self.exc = exc

    def encode(self, texts, *, batch_size=64):
        raise self.exc


@pytest.mark.parametrize("exc, fragment", [
    (PermissionError(13, "Permission denied", "/c/shard.npy"), "/c/shard.npy: permission denied"),
    (OSError(30, "Read-only file system", "/c"), "read-only file system"),
    (OSError(28, "No space left on device", "/c"), "no space left"),
], ids=["read-only-cache", "read-only-fs", "disk-full"])
def test_own_resource_failure_is_a_503_with_the_reason(exc, fragment):
    model = make_method("baseline")
    with BackgroundServer(create_app(EmbeddingService(Failing(exc), model, label="m"))) as url:
        r = httpx.post(url + E, json={"input": "x"}, timeout=30)
    assert r.status_code == 503
    assert fragment in r.json()["error"]["message"]
    assert r.json()["error"]["type"] == "server_error"


def test_text_an_npy_encoder_lacks_is_a_400(tmp_path):
    from disembed import load_encoder

    np.save(tmp_path / "e.npy", np.eye(3, 8, dtype=np.float32))
    (tmp_path / "e.txt").write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    enc = load_encoder(f"npy:{tmp_path / 'e.npy'}")
    with BackgroundServer(create_app(EmbeddingService(enc, make_method("baseline")))) as url:
        assert httpx.post(url + E, json={"input": "zwei"}).status_code == 200
        r = httpx.post(url + E, json={"input": "vier"}, timeout=30)
    assert r.status_code == 400 and "cannot embed" in r.json()["error"]["message"]
