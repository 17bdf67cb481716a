"""Text is normalised at one edge (issue 31, point 4-5): NFC, control characters other than
TAB and LF as a space, applied by ``check_texts`` (every encoder, the cache's keys, the
npy encoder's lookup). Bugs these tests catch: normalisation missing on one path, a cache
keyed by the text as given (an old entry for ``a\\x00b``, embedded as ``a`` by the C
engine's string cut, served again), a NUL that silently ends the text."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import bounded

from disembed.encoders import HashEncoder
from disembed.encoders.base import check_texts
from disembed.encoders.cached import CachedEncoder
from disembed.encoders.npy_encoder import NpyEncoder
from disembed.exceptions import DataError
from disembed.util.text import normalize_text

PAIRS = ["Việt Nam rất đẹp", "Straße über Öl", "été à Noël", "한국어 문장", "Ελληνικά ά"]


def test_nfc_and_nfd_are_one_text():
    for text in PAIRS:
        for form in ("NFD", "NFC"):
            assert normalize_text(unicodedata.normalize(form, text)) == \
                unicodedata.normalize("NFC", text)


def test_control_characters_become_spaces_but_tab_and_newline_stay():
    assert normalize_text("a\x00b\x01c\x1fd\x7fe\x85f\x9fg") == "a b c d e f g"
    assert normalize_text("tab\there\nnext\rcr") == "tab\there\nnext cr"
    assert normalize_text("zero\u200bwidth\u00a0nbsp ﬁ ²") == "zero\u200bwidth\u00a0nbsp ﬁ ²"


@given(st.text(max_size=40))
@bounded(200)
def test_normalisation_is_idempotent(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert unicodedata.is_normalized("NFC", once)
    assert not any(unicodedata.category(c) == "Cc" and c not in "\t\n" for c in once)


def test_check_texts_returns_the_normalised_texts_and_refuses_control_only_ones():
    assert check_texts(["e\u0301", "a\x00b"]) == ["é", "a b"]
    with pytest.raises(DataError, match="sentence 1 is empty"):
        check_texts(["ok", "\x00\x01"])


def test_every_form_gets_one_vector_from_an_encoder():
    enc = HashEncoder(16)
    for text in PAIRS:
        nfd = unicodedata.normalize("NFD", text)
        np.testing.assert_array_equal(enc.encode([nfd]), enc.encode([text]))
    np.testing.assert_array_equal(enc.encode(["a\x00b"]), enc.encode(["a b"]))


def test_cache_is_keyed_by_the_normalised_text(tmp_path):
    """An old cache may hold an entry for the raw text (``a\\x00b`` embedded as ``a``, the
    C engine's cut): it must never be served for that text again."""
    enc = CachedEncoder(HashEncoder(16), tmp_path)
    stale = enc.encoder.encode(["a"])
    enc.store.put(["a\x00b"], stale)  # what an older disembed stored under the raw text
    got = enc.encode(["a\x00b"])
    np.testing.assert_array_equal(got, HashEncoder(16).encode(["a b"]))
    assert not np.allclose(got, stale)
    nfd = unicodedata.normalize("NFD", PAIRS[0])
    enc.fill([nfd])  # fill (used by `prepare`) keys by the normalised text too
    assert PAIRS[0] in enc.store and nfd not in enc.store
    np.testing.assert_array_equal(enc.encode([nfd]), enc.encode([PAIRS[0]]))


def test_npy_encoder_finds_a_text_in_any_form(tmp_path):
    np.save(tmp_path / "v.npy", np.eye(3, dtype=np.float32))
    (tmp_path / "v.txt").write_text("\n".join([PAIRS[0], "b", unicodedata.normalize(
        "NFD", PAIRS[1])]) + "\n", encoding="utf-8")
    enc = NpyEncoder(str(tmp_path / "v.npy"))
    got = enc.encode([unicodedata.normalize("NFD", PAIRS[0]), PAIRS[1]])
    np.testing.assert_array_equal(got, np.eye(3, dtype=np.float32)[[0, 2]])
