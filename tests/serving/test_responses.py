"""The service's JSON bodies (orjson), on a live uvicorn server.

Bugs feared: a writer that rounds the floats (float32's shortest decimal, or fewer digits),
so a client computing in float64 gets another vector than the library's; NaN written as
``null`` (orjson's default) and read by a client as a missing value; a body not sent as
``application/json``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import identity_method  # noqa: E402
from disembed.serving.app import BackgroundServer, create_app  # noqa: E402
from disembed.serving.responses import json_response, vector_floats  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

TEXTS = ["guten Morgen", "Доброе утро", "おはようございます", "x"]


class NaNForSome(HashEncoder):
    """The hash encoder, with NaN in the vector of every text that starts with ``nan``."""

    def encode(self, texts, *, batch_size=64):
        out = super().encode(texts, batch_size=batch_size)
        out[[t.startswith("nan") for t in texts], 3] = np.nan
        return out


@pytest.fixture(scope="module")
def url():
    service = EmbeddingService(NaNForSome(dim=384), identity_method(), label="raw-hash")
    with BackgroundServer(create_app(service)) as address:
        yield address


def test_vectors_are_the_library_float32_values_exactly(url):
    want = HashEncoder(dim=384).encode(TEXTS).astype(np.float64)
    openai = httpx.post(url + "/v1/embeddings", json={"input": TEXTS}, timeout=30)
    tei = httpx.post(url + "/embed", json={"inputs": TEXTS, "normalize": False}, timeout=30)
    for response in (openai, tei):
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
    got = np.array([d["embedding"] for d in json.loads(openai.content)["data"]])
    np.testing.assert_array_equal(got, want)  # float64 parse == the float32 value, every bit
    np.testing.assert_array_equal(np.array(json.loads(tei.content)), want)


@pytest.mark.parametrize("path, body", [
    ("/v1/embeddings", {"input": ["ok", "nan here"]}),
    ("/v1/embeddings", {"input": ["nan here"], "encoding_format": "base64"}),
    ("/embed", {"inputs": ["nan here"]})])
def test_a_nan_vector_is_a_500_not_null(url, path, body):
    response = httpx.post(url + path, json=body, timeout=30)
    assert response.status_code == 500
    assert "NaN or infinite" in response.text and isinstance(response.json(), dict)
    assert "data" not in response.json()  # no vectors, not one with a null in it


def test_writer_keeps_every_digit_and_refuses_non_finite():
    values = np.float32([0.1, -1 / 3, 1e-8, 3.4e38])
    body = json_response({"v": vector_floats(values)}).body
    assert json.loads(body)["v"] == [float(v) for v in values]
    assert json.loads(body) == json.loads(json.dumps({"v": values.tolist()}))
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError, match="NaN or infinite"):
            vector_floats(np.float32([[0.5, bad]]))
