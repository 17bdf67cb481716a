"""The e5-small export's tokenizer, saved and reloaded as sentence-transformers loads it,
gives disembed's own e5 tokens (the C engine's) in every Tatoeba language (a sample kept in
the repository; more of each language from the benchmark data when it is there)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from disembed.data.paths import resolve_data_dir  # noqa: E402
from disembed.encoders.e5_export import hf_fast_tokenizer  # noqa: E402
from disembed.encoders.e5_format import read_e5_file  # noqa: E402
from disembed.encoders.e5_tokenizer import E5Tokenizer  # noqa: E402
from disembed.encoders.e5_torch import bundled_weights  # noqa: E402
from disembed.exceptions import DisembedError  # noqa: E402

PER_LANGUAGE = 8
# scripts and cases the Tatoeba sample may miss: full-width forms (e5's normalisation map),
# runs of characters no piece holds (one <unk> each), spaces, tabs, mixed scripts
EXTRA = ["Ｈｅｌｌｏ　ｗｏｒｌｄ！１２３", "ꦣꦺꦏꦺꦢꦶꦒꦼ", "a  b   c ", " leading", "tab\there",
         "混合 text ﾃｽﾄ", "𝐁𝐨𝐥𝐝 math", "Hƿȳ bohtest þū hit?", "<s> tags </s>", "x\u200by",
         "…‥「」『』", "🙂🙃 emoji",
         # Unicode forms and control characters: both sides apply disembed's edge (NFC,
         # control characters other than TAB/LF to a space), so NFD and NFC agree
         "Vie\u0323\u0302t Nam", "e\u0301te\u0301", "Stra\u00dfe u\u0308ber", "a\x00b",
         "after NUL\x00 the rest", "bell\x07 and\x1b esc\x85 nel\x7f del\r cr"]


SAMPLE = Path(__file__).parents[1] / "fixtures" / "tatoeba_sample.tsv"


def repository_sample() -> dict[str, list[str]]:
    """Two sentences of every Tatoeba language, kept in the repository (tests/fixtures)."""
    out: dict[str, list[str]] = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines()[1:]:
        lang, text = line.split("\t")
        out.setdefault(lang, []).append(text)
    return out


def tatoeba_samples(per_language: int = PER_LANGUAGE) -> dict[str, list[str]]:
    """``per_language`` sentences spread over each Tatoeba file (both sides of every pair)
    of the benchmark data, when it is there (``{}`` when not)."""
    try:
        folder = resolve_data_dir(None) / "tatoeba"
    except DisembedError:
        return {}
    out: dict[str, list[str]] = {}
    for path in sorted(folder.glob("tatoeba.*-eng.*")):
        lines = [t for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
        step = max(1, len(lines) // per_language)
        out[path.name.rsplit(".", 1)[1]] = lines[::step][:per_language]
    return out


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    from transformers import AutoTokenizer

    f = read_e5_file(bundled_weights())
    folder = tmp_path_factory.mktemp("e5-tokenizer")
    hf_fast_tokenizer(f).save_pretrained(folder)
    return E5Tokenizer(f), AutoTokenizer.from_pretrained(folder)


def mismatches(ours, hf, texts, side="passage"):
    prefix = {"passage": "passage: ", "query": "query: "}[side]
    got = hf([prefix + t for t in texts])["input_ids"]
    return [t for t, ids in zip(texts, got, strict=True) if ours.encode(t, side) != ids]


def test_reloaded_tokenizer_keeps_e5s_normalisation(tokenizers):
    _, hf = tokenizers
    assert type(hf).__name__ in ("TokenizersBackend", "PreTrainedTokenizerFast")
    assert hf.backend_tokenizer.normalizer is not None  # XLMRobertaTokenizer drops it


def test_export_tokens_equal_disembeds_in_every_tatoeba_language(tokenizers):
    """Two sentences of each of the 112 languages (kept in the repository), and 8 of each
    file of the benchmark data when it is there."""
    ours, hf = tokenizers
    samples = repository_sample()
    for lang, texts in tatoeba_samples().items():
        samples.setdefault(lang, []).extend(texts)
    assert len(samples) >= 113  # 112 languages + English
    bad = {lang: m for lang, texts in samples.items() if (m := mismatches(ours, hf, texts))}
    assert not bad, f"{len(bad)} languages tokenize differently: {bad}"


def test_export_tokens_equal_on_hard_cases_for_both_sides(tokenizers):
    ours, hf = tokenizers
    assert mismatches(ours, hf, EXTRA) == []
    assert mismatches(ours, hf, EXTRA, side="query") == []
    # one <unk> per unknown character, as the C engine does (the Unigram model fuses runs)
    ids = hf(["passage: ꦣꦺꦏꦺ"])["input_ids"][0]
    assert ids.count(ours.unk) == 4 and ids == ours.encode("ꦣꦺꦏꦺ")


def test_unicode_forms_and_control_characters_tokenize_alike(tokenizers):
    """NFC and NFD spellings give the same tokens, in disembed and in the export; a NUL (or
    any control character but TAB/LF) is a space: the rest of the text is never cut off."""
    import unicodedata

    ours, hf = tokenizers

    def hf_ids(text):
        return hf(["passage: " + text])["input_ids"][0]

    for nfc in ["Việt Nam rất đẹp", "Straße über Öl", "été à Noël", "한국어 문장"]:
        nfd = unicodedata.normalize("NFD", nfc)
        assert nfd != nfc
        assert ours.encode(nfd) == ours.encode(nfc) == hf_ids(nfd) == hf_ids(nfc), nfc
    for text, same_as in [("a\x00b c", "a b c"), ("cut\x00 here? no", "cut here? no"),
                          ("x\x1fy\x85z", "x y z")]:
        assert ours.encode(text) == ours.encode(same_as) == hf_ids(text), repr(text)
