"""The service and language codes (issue 17.7): codes normalised, unknown codes a 400 with
the nearest ones, ``raw`` never asks, the response says which language was used and whether
it was predicted, and no ``language`` is needed (the model's language identifier).
Through the real uvicorn server on 127.0.0.1 (hash encoder)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.methods.text_path import text_meaning  # noqa: E402
from disembed.serving.app import BackgroundServer, create_app  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

ENC = HashEncoder(16)
E = "/v1/embeddings"


def pairs(n=64):
    rng = np.random.default_rng(0)
    de = [f"satz {i} {rng.integers(1000)}" for i in range(n)]
    return ENC.encode(de), ENC.encode([s.upper() for s in de])


@pytest.fixture(scope="module")
def servers():
    X, Y = pairs()
    centred = make_method("mean-centering").fit(X, Y, "de", "en")
    head = make_method("seed-centered", max_epochs=1, batch_size=32).fit(X, Y, "de", "en")
    out, stack = {}, []
    for name, model in (("plain", centred), ("ided", head)):
        server = BackgroundServer(create_app(EmbeddingService(ENC, model, label=name)))
        out[name] = (server.__enter__(), model)
        stack.append(server)
    yield out
    for server in stack:
        server.__exit__(None, None, None)


def embed(url, body):
    body = {"normalize": False, **body}  # the library's vector (unit: test_unit_vectors.py)
    r = httpx.post(url + E, json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_every_spelling_of_a_code_gives_the_same_vectors(servers):
    url, model = servers["plain"]
    texts = ["guten morgen", "wie geht es"]
    got = {code: [d["embedding"] for d in embed(url, {"input": texts, "language": code})]
           for code in ("de", "deu", "de-DE", "DE", "deu_Latn")}
    for code, vectors in got.items():
        np.testing.assert_array_equal(vectors, got["de"], err_msg=code)
    np.testing.assert_allclose(got["de"], model.meaning(ENC.encode(texts), "de"), atol=1e-6)


def test_unknown_code_is_a_400_naming_the_nearest_codes(servers):
    url, _ = servers["plain"]
    for code, near in (("xx-nonsense", "nearest known codes: xh"),
                       ("dex", "nearest known codes: de"), ("zz-top", "zh")):
        r = httpx.post(url + E, json={"input": "x", "language": code}, timeout=30)
        assert r.status_code == 400, code
        message = r.json()["error"]["message"]
        assert f"unknown language code {code!r}" in message and near in message, message
        assert r.json()["error"]["param"] == "language"
    r = httpx.post(url + "/v1/similarity", json={"pairs": [["a", "b"]],
                                                 "languages": ["de", "zz-top"]})
    assert r.status_code == 400 and "'zz-top'" in r.json()["error"]["message"]


def test_raw_never_asks_for_a_language(servers):
    url, _ = servers["plain"]
    data = embed(url, {"input": ["hallo"], "model": "raw"})
    np.testing.assert_allclose(data[0]["embedding"], ENC.encode(["hallo"])[0], atol=1e-6)
    assert "language" not in data[0]


def test_the_response_says_which_language_was_used(servers):
    url, _ = servers["plain"]
    data = embed(url, {"input": ["a", "b"], "language": ["deu", "EN"]})
    assert [(d["language"], d["language_predicted"]) for d in data] == [
        ("de", False), ("en", False)]


def test_an_old_model_without_an_identifier_asks_for_the_language():
    X, Y = pairs()
    model = make_method("mean-centering").fit(X, Y, "de", "en")
    model.language_id_ = None  # as saved by a disembed before the identifier existed
    with BackgroundServer(create_app(EmbeddingService(ENC, model, label="old"))) as url:
        r = httpx.post(url + E, json={"input": ["a"]}, timeout=30)
        assert r.status_code == 400 and "add 'language'" in r.json()["error"]["message"]
        assert httpx.post(url + E, json={"input": ["a"], "language": "de"}).status_code == 200


def test_the_model_identifies_the_language_when_none_is_given(servers):
    url, model = servers["ided"]
    texts = ["satz 1 2", "SATZ 1 2"]
    data = embed(url, {"input": texts})
    raw = ENC.encode(texts)
    guessed = text_meaning(model, raw, texts)  # the text path: reported with probability
    assert [(d["language"], d["language_probability"], d["language_predicted"])
            for d in data] == list(zip(guessed.languages, guessed.probabilities,
                                       [True, True], strict=True))
    # the vector is the model's own untagged meaning (the identifier's mixture), row by row
    np.testing.assert_allclose([d["embedding"] for d in data],
                               np.vstack([model.meaning(raw[i:i + 1])
                                          for i in range(len(texts))]), atol=1e-6)
    mixed = embed(url, {"input": texts, "language": ["en", None]})  # null: predict that row
    assert [(d["language"], d["language_predicted"]) for d in mixed] == [
        ("en", False), (guessed.languages[1], True)]


def test_one_sentence_alone_equals_it_in_a_batch_of_50_and_20_texts_differ(servers):
    """Issue 17's done-when, through the real server: no tag given."""
    url, _ = servers["ided"]
    texts = [f"ein ganz anderer satz nummer {i}" for i in range(50)]
    batch = np.array([d["embedding"] for d in embed(url, {"input": texts})])
    for i in (0, 17, 49):
        alone = np.array(embed(url, {"input": [texts[i]]})[0]["embedding"])
        cos = alone @ batch[i] / (np.linalg.norm(alone) * np.linalg.norm(batch[i]))
        assert cos >= 0.999, (i, cos)
    twenty = np.array([d["embedding"] for d in embed(url, {"input": texts[:20]})])
    assert len({tuple(np.round(v, 6)) for v in twenty}) == 20
    assert np.linalg.norm(twenty, axis=1).min() > 1e-3  # never the zero vector
