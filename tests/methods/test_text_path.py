"""The one text path (:func:`disembed.methods.text_path.text_meaning`): every surface's
meaning of a text, and the language it is reported as, from ONE pass of the language
identifier per call (a batch, a request).

Bugs feared (each put in and seen failing here): routing twice per call (the service
resolved the reported language, then routed again for the vector), the identifier run twice
per routing (once for a log line, once for the weights), a reported language that is a
training language for a script no training language writes (Greek as ``de``), a report
without its probability.
"""

from __future__ import annotations

import numpy as np
import pytest
from script_models import ALLOWED, SCRIPT_TEXTS, fit_script_model

from disembed.encoders import HashEncoder
from disembed.methods.language_id import LanguageIdentifier
from disembed.methods.text_path import meaning_of_texts, text_meaning
from disembed.util.routing_rule import REPORT_THRESHOLD


@pytest.fixture(scope="module")
def model():
    return fit_script_model("mean-centering")


@pytest.fixture()
def passes(monkeypatch):
    """How many times the identifier computes its logits (one pass over some rows)."""
    seen = []
    real = LanguageIdentifier._logits

    def counted(self, X):
        seen.append(len(X))
        return real(self, X)

    monkeypatch.setattr(LanguageIdentifier, "_logits", counted)
    return seen


def test_one_identifier_pass_per_batch(model, passes):
    X = HashEncoder(16).encode(SCRIPT_TEXTS)
    out = text_meaning(model, X, SCRIPT_TEXTS)
    assert passes == [len(SCRIPT_TEXTS)]  # one pass, over every untagged row
    assert out.vectors.shape == (len(SCRIPT_TEXTS), model.meaning(X[:1], "de").shape[1])
    passes.clear()
    meaning_of_texts(model, X, SCRIPT_TEXTS, ["de", None, "zh", None, None, "ar"])
    assert passes == [3]  # only the untagged rows
    passes.clear()
    meaning_of_texts(model, X, SCRIPT_TEXTS, "de")
    assert passes == []  # every row tagged: no pass


def test_one_pass_for_both_parts(model, passes):
    X = HashEncoder(16).encode(SCRIPT_TEXTS)
    views = text_meaning(model, X, SCRIPT_TEXTS, part="views").vectors
    assert passes == [len(SCRIPT_TEXTS)]
    np.testing.assert_allclose(views["meaning"], meaning_of_texts(model, X, SCRIPT_TEXTS),
                               atol=1e-6)


def test_the_text_path_is_the_library_row_by_row(model):
    X = HashEncoder(16).encode(SCRIPT_TEXTS)
    whole = meaning_of_texts(model, X, SCRIPT_TEXTS)
    for i, text in enumerate(SCRIPT_TEXTS):
        np.testing.assert_allclose(meaning_of_texts(model, X[i:i + 1], [text]), whole[i:i + 1],
                                   atol=1e-6)


def test_the_reported_language_comes_with_its_probability_or_is_und(model):
    X = HashEncoder(16).encode(SCRIPT_TEXTS)
    out = text_meaning(model, X, SCRIPT_TEXTS)
    assert out.predicted == [True] * len(SCRIPT_TEXTS)
    for text, code, p, allowed in zip(SCRIPT_TEXTS, out.languages, out.probabilities, ALLOWED,
                                      strict=True):
        assert 0.0 <= p <= 1.0, (text, p)
        if text == "καλημέρα κόσμε":  # no training language writes Greek
            assert (code, p) == ("und-Grek", 0.0)
        elif text == "123":  # no letter: no language (was the identifier's guess, zh)
            assert (code, p) == ("und-Zyyy", 0.0)
        elif p < REPORT_THRESHOLD:
            assert code in ("und", "und-Latn"), (text, code, p)
        elif allowed is not None:
            assert code in allowed, (text, code)
    # Cyrillic, Han, Arabic: one training language each writes them, so it is certain
    assert out.languages[1:4] == ["ru", "zh", "ar"] and out.probabilities[1:4] == [1.0] * 3
    tagged = text_meaning(model, X, SCRIPT_TEXTS, "de")
    assert tagged.languages == ["de"] * 6 and tagged.probabilities == [None] * 6
    assert tagged.predicted == [False] * 6


def test_mining_runs_the_identifier_once_per_batch(model, passes):
    """Mining's meaning transform (local and on Ray: one call per block of texts) is the
    text path: one pass per block, and the library's vectors."""
    from disembed.mining.mine import meaning_transform

    X = HashEncoder(16).encode(SCRIPT_TEXTS)
    got = meaning_transform(model, None)(X, SCRIPT_TEXTS)
    assert passes == [len(SCRIPT_TEXTS)]
    np.testing.assert_array_equal(got, meaning_of_texts(model, X, SCRIPT_TEXTS))
