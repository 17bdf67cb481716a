"""Issue 45.4: the service answers unit vectors where its clients expect them, and the
meaning part as the library computes it where they ask for it.

``/v1/embeddings`` returns unit-length vectors as OpenAI's do (a dot-product vector store
then ranks by cosine), float or base64; ``"normalize": false`` gives the vector of the
library's ``model.meaning``. ``/embed`` (TEI) normalises unless ``normalize`` is false.
Normalising is a post-step: the direction is the model's in every case.

Bugs feared: vectors of norm ~0.5 on /v1/embeddings (as before), a ``normalize`` flag that
is ignored, or that changes the direction, base64 left unnormalised, a zero vector made
NaN, the two routes disagreeing.
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, create_app  # noqa: E402
from disembed.serving.responses import unit_rows  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

TEXTS = ["hallo welt", "guten tag", "wie geht es"]


class HalfHash(HashEncoder):
    """Hash vectors of norm 0.5, as real meaning parts are (0.45-0.51 in issue 45)."""

    def encode(self, texts, *, batch_size=64):
        return 0.5 * super().encode(texts, batch_size=batch_size)


def _model(enc):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    de = [" ".join(rng.choice(words, 4)) for _ in range(64)]
    return make_method("mean-centering").fit(enc.encode(de), enc.encode([s.upper() for s in de]),
                                             "de", "en")


@pytest.fixture(scope="module")
def served():
    enc = HalfHash(16)
    service = EmbeddingService(enc, _model(enc), label="mc")
    with BackgroundServer(create_app(service)) as url:
        yield url, service.model.meaning(enc.encode(TEXTS), "de")


def _norms(rows) -> np.ndarray:
    return np.linalg.norm(np.asarray(rows, dtype=np.float64), axis=1)


def test_the_meaning_part_is_not_unit_length_so_the_test_can_tell(served):
    _, meaning = served
    assert np.all(np.abs(_norms(meaning) - 1) > 0.3)


def test_openai_client_gets_unit_vectors_in_the_meanings_direction(served):
    openai = pytest.importorskip("openai")
    url, meaning = served
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    for fmt in ({}, {"encoding_format": "float"}):  # by default the client asks base64
        got = client.embeddings.create(model="mc", input=TEXTS, **fmt,
                                       extra_body={"language": "de"})
        rows = np.array([d.embedding for d in got.data])
        np.testing.assert_allclose(_norms(rows), 1.0, atol=1e-6)
        np.testing.assert_allclose(rows, meaning / _norms(meaning)[:, None], atol=1e-6)


def test_normalize_false_gives_the_librarys_vector(served):
    openai = pytest.importorskip("openai")
    url, meaning = served
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    got = client.embeddings.create(model="mc", input=TEXTS,
                                   extra_body={"language": "de", "normalize": False})
    np.testing.assert_allclose([d.embedding for d in got.data], meaning, atol=1e-6)
    raw = httpx.post(url + "/v1/embeddings", timeout=30, json={
        "input": TEXTS, "language": "de", "normalize": False, "encoding_format": "base64"})
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in raw.json()["data"]]
    np.testing.assert_allclose(decoded, meaning, atol=1e-6)


def test_normalize_must_be_a_boolean(served):
    url, _ = served
    got = httpx.post(url + "/v1/embeddings", json={"input": "x", "normalize": "no"}, timeout=30)
    assert got.status_code == 400 and "'normalize' must be true or false" in \
        got.json()["error"]["message"]


def test_tei_json_as_teis_client_posts_it(served):
    """What ``huggingface_hub.InferenceClient.feature_extraction`` and TEI's own clients send:
    ``{"inputs": [...], "normalize": bool, "truncate": bool}``; TEI's default is true."""
    url, meaning = served
    for body, want in (({"inputs": TEXTS}, meaning / _norms(meaning)[:, None]),
                       ({"inputs": TEXTS, "normalize": True, "truncate": False},
                        meaning / _norms(meaning)[:, None]),
                       ({"inputs": TEXTS, "normalize": False}, meaning)):
        got = httpx.post(url + "/embed", json={**body, "language": "de"}, timeout=30)
        assert got.status_code == 200, got.text
        np.testing.assert_allclose(got.json(), want, atol=1e-6)
    openai = httpx.post(url + "/v1/embeddings", json={"input": TEXTS, "language": "de"},
                        timeout=30).json()
    tei = httpx.post(url + "/embed", json={"inputs": TEXTS, "language": "de"}, timeout=30)
    np.testing.assert_allclose([d["embedding"] for d in openai["data"]], tei.json(), atol=1e-6)


def test_a_zero_vector_stays_zero_and_unit_rows_keep_direction():
    rows = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    got = unit_rows(rows)
    assert got.dtype == np.float32 and np.isfinite(got).all()
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.0, 0.0]], atol=1e-7)
