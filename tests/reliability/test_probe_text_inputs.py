"""Issue 48.4: every API that takes texts refuses what is not an ordered list of sentences
(a bare string once gave one vector per character), with an error that says what was given,
what is expected and how to fix it; language lists keep the caller's order."""

from __future__ import annotations

import numpy as np
import pytest

from disembed import SavedModel, calibrate_saved, load_encoder
from disembed.encoders.cached import cached
from disembed.encoders.truncated import TruncatedEncoder
from disembed.exceptions import DataError

BAD_TEXTS = {
    "bare string": ("hallo", "single str .'hallo'.; wrap it in a list"),
    "bytes": (b"hallo", "single bytes .*decode it first"),
    "set": ({"a", "b"}, "got a set, whose order is not yours"),
    "frozenset": (frozenset({"a"}), "got a frozenset"),
    "dict": ({"a": 1}, "got a dict"),
    "int": (5, "got int .5.; pass a list of str"),
    "None": (None, "got NoneType"),
    "float": (1.5, "got float"),
    "generator": ((t for t in ["a", "b"]), "one-shot generator"),
    "map iterator": (map(str, [1, 2]), "one-shot map"),
    "2-D array": (np.array([["a", "b"]]), "2-D array of shape .1, 2."),
}


def _hash():
    return load_encoder("hash:16")


ENTRIES = {
    "encoder.encode": lambda t, env, tmp: _hash().encode(t),
    "cached.encode": lambda t, env, tmp: cached(_hash(), tmp / "c").encode(t),
    "cached.token_counts": lambda t, env, tmp: cached(_hash(), tmp / "c").token_counts(t),
    "truncated.encode": lambda t, env, tmp: TruncatedEncoder(_hash(), 8).encode(t),
    "SavedModel.meaning": lambda t, env, tmp: SavedModel.load(env["model"]).meaning(t),
    "calibrate_saved": lambda t, env, tmp: calibrate_saved(env["model"], "ja", t,
                                                           out=tmp / "m"),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("case", sorted(BAD_TEXTS))
def test_every_text_entry_refuses_what_is_not_a_list_of_sentences(env, tmp_path, entry, case):
    value, message = BAD_TEXTS[case]
    if case in ("generator", "map iterator"):  # one-shot: a fresh one per test
        value = (t for t in ["a", "b"]) if case == "generator" else map(str, [1, 2])
    with pytest.raises(DataError, match=message):
        ENTRIES[entry](value, env, tmp_path)


def test_saved_model_meaning_of_a_bare_string_was_one_vector_per_character(env):
    """The bug as filed: five vectors for "hallo". A one-item list gives one."""
    saved = SavedModel.load(env["model"])
    with pytest.raises(DataError, match="wrap it in a list"):
        saved.meaning("hallo")
    assert saved.meaning(["hallo"]).shape[0] == 1
    assert saved.meaning(("hallo", "welt")).shape[0] == 2
    assert saved.meaning(np.array(["hallo", "welt"])).shape[0] == 2


@pytest.mark.parametrize("languages", [{"de", "en"}, (c for c in ["de", "en"]), 7])
def test_language_lists_must_keep_the_callers_order(env, languages):
    saved = SavedModel.load(env["model"])
    with pytest.raises(DataError, match="languages: expected a list of language codes"):
        saved.meaning(["Satz eins", "sentence two"], languages)


def test_the_disentangler_refuses_an_unordered_language_list(env):
    saved = SavedModel.load(env["model"])
    X = saved.encoder.encode(["a", "b"])
    with pytest.raises(DataError, match="got a set"):
        saved.disentangler.meaning(X, {"de", "en"})


def test_a_per_row_language_list_is_applied_in_the_callers_order(env):
    saved = SavedModel.load(env["model"])
    texts = ["Satz eins", "sentence two"]
    both = saved.meaning(texts, ["de", "en"])
    np.testing.assert_allclose(both[0], saved.meaning(texts[:1], "de")[0], atol=1e-6)
    np.testing.assert_allclose(both[1], saved.meaning(texts[1:], "en")[0], atol=1e-6)


@pytest.mark.parametrize("languages, message", [
    ("de", "got a single str"), ({"de", "fr"}, "got a set"), (["de", "deu"], "'de' twice"),
    (["fr", "de", "fr"], "'fr' twice")])
def test_build_training_set_refuses_unordered_or_repeated_languages(env, languages, message):
    from disembed import build_training_set
    from disembed.exceptions import ConfigError

    with pytest.raises((DataError, ConfigError), match=message):
        build_training_set(languages, pairs_per_language=5, holdout_per_language=2)


def test_build_training_set_keeps_the_callers_language_order(env):
    from disembed import build_training_set

    a = build_training_set(["zh", "de"], pairs_per_language=5, holdout_per_language=2)
    b = build_training_set(["de", "zh"], pairs_per_language=5, holdout_per_language=2)
    assert [r.language for r in a.languages] == ["zh", "de"]
    assert [r.language for r in b.languages] == ["de", "zh"]


@pytest.mark.parametrize("field", ["src", "tgt", "src_lang", "tgt_lang"])
def test_parallel_pairs_refuse_a_string_for_a_column(field):
    from disembed import ParallelPairs

    columns = {"src": ["a", "b"], "tgt": ["x", "y"], "src_lang": ["de", "de"],
               "tgt_lang": ["en", "en"]}
    columns[field] = "ab"  # two characters: the lengths agreed, the pairs were nonsense
    with pytest.raises(DataError, match=f"ParallelPairs: {field}: expected a list"):
        ParallelPairs(**columns)


@pytest.mark.parametrize("pool", ["src_pool", "tgt_pool"])
def test_score_tsv_refuses_a_bare_string_as_a_reference_pool(env, tmp_path, pool):
    from disembed import score_tsv
    from disembed.encoders import HashEncoder

    with pytest.raises(DataError, match=f"score_tsv: {pool}: expected a list of sentences"):
        score_tsv(env["st"], HashEncoder(8), tmp_path / "s.tsv", kind="ratio",
                  **{pool: "Satz eins"})
    assert not (tmp_path / "s.tsv").exists()
