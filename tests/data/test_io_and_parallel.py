import pytest

from disembed.data.io import read_aligned, read_tsv
from disembed.data.languages import normalize_language, to_iso3
from disembed.data.parallel import read_parallel_files, read_parallel_tsv
from disembed.exceptions import ConfigError, DataError


def _write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def test_tsv_reads_named_columns_with_quotes(tmp_path):
    p = _write(tmp_path / "p.tsv", 'en\tde\textra\n"Hi," he said\t"Hallo"\tx\n')
    pairs = read_parallel_tsv(p, "de", "en")
    assert pairs.src == ['"Hallo"'] and pairs.tgt == ['"Hi," he said']
    assert pairs.src_lang == ["de"] and pairs.tgt_lang == ["en"]


def test_ragged_row_names_file_and_line(tmp_path):
    p = _write(tmp_path / "p.tsv", "en\tde\na\tb\nc\n")
    with pytest.raises(DataError, match=r"p.tsv:3: has 1 fields, the header has 2"):
        read_tsv(p, ["en", "de"])
    rows, report = read_tsv(p, ["en", "de"], skip_bad=True)
    assert len(rows) == 1 and report.skipped == 1


def test_empty_sentence_and_missing_column(tmp_path):
    p = _write(tmp_path / "p.tsv", "en\tde\na\t  \n")
    with pytest.raises(DataError, match=r"p.tsv:2: empty sentence in column\(s\) \['de'\]"):
        read_tsv(p, ["en", "de"])
    with pytest.raises(DataError, match="header has no column"):
        read_tsv(p, ["en", "fr"])


def test_undecodable_bytes_name_the_line(tmp_path):
    p = _write(tmp_path / "p.tsv", b"en\tde\nok\tgut\nbad\t\xff\xfe\n")
    with pytest.raises(DataError, match=r"p.tsv:3: bytes .* are not valid UTF-8"):
        read_tsv(p, ["en", "de"])


def test_aligned_files_must_have_equal_lengths(tmp_path):
    a = _write(tmp_path / "a.de", "eins\nzwei\n")
    b = _write(tmp_path / "b.en", "one\n")
    with pytest.raises(DataError, match="has 2 lines but .* has 1"):
        read_aligned(a, b)
    b = _write(tmp_path / "b.en", "one\n\n")
    with pytest.raises(DataError, match=r"b.en:2: empty sentence"):
        read_parallel_files(a, b, "deu", "eng")
    pairs = read_parallel_files(a, b, "deu", "eng", skip_bad=True)
    assert len(pairs) == 1 and pairs.reports[0].skipped == 1 and pairs.src_lang == ["de"]


@pytest.mark.parametrize("code,canonical", [
    ("de", "de"), ("deu", "de"), ("zho_Hans", "zh"), ("cmn", "zh"), ("swh", "sw"),
    ("yue", "yue"), ("de-DE", "de"), ("DE", "de"), ("deu_Latn", "de"), (" De-at ", "de"),
    ("zh-Hant-TW", "zh"), ("ZH-cn", "zh"), ("pt-BR", "pt"), ("fil", "tl"), ("tgl", "tl"),
    ("iw", "he"), ("sr-Cyrl", "sr"), ("hbs", "sh"), ("nob", "nb"), ("arb", "ar"),
    ("npi", "ne"), ("english", "en")])
def test_language_codes_normalise(code, canonical):
    assert normalize_language(code) == canonical


@pytest.mark.parametrize("code,nearest", [("xx-nonsense", "xh"), ("deuu", "de"),
                                          ("zz", None), ("", None)])
def test_unknown_codes_name_the_nearest_known_ones(code, nearest):
    with pytest.raises(ConfigError) as info:
        normalize_language(code)
    if nearest:
        assert f"nearest known: {nearest}" in str(info.value)


def test_every_known_code_is_its_own_canonical_form():
    from disembed.data.languages import known_languages

    assert all(normalize_language(code) == code for code in known_languages())
    assert all(normalize_language(code.upper()) == code for code in known_languages())


def test_unknown_language_lists_known_codes():
    with pytest.raises(ConfigError, match="Unknown language code 'qqq'.*data for: af"):
        normalize_language("qqq")  # reserved for local use: names no language
    assert to_iso3("zh") == "cmn"


@pytest.mark.parametrize("code,canonical", [
    ("yo", "yo"), ("yor", "yo"), ("bo", "bo"), ("bod", "bo"), ("tib", "bo"), ("haw", "haw"),
    ("yo-NG", "yo"), ("bod_Tibt", "bo"), ("kok", "kok"), ("iw", "he"), ("i-klingon", "tlh")])
def test_every_real_languages_code_is_accepted(code, canonical):
    """Issue 31: a real ISO 639 / BCP-47 code is accepted though the project has no data
    for the language (Yoruba and Tibetan were refused)."""
    assert normalize_language(code) == canonical


@pytest.mark.parametrize("code", ["xx", "zzz", "x-private", "qaa", "123", "und", "mul", "d3"])
def test_malformed_or_languageless_codes_are_errors(code):
    with pytest.raises(ConfigError):
        normalize_language(code)


def test_undetermined_tags_are_no_tag():
    from disembed.data.languages import normalize_tag, valid_language_subtags

    assert [normalize_tag(c) for c in (None, "und", "UND", "mul", "und-DE", "de")] == [
        None, None, None, None, None, "de"]
    # a script subtag keeps the script (the script prior), in any spelling
    assert [normalize_tag(c) for c in ("und-Latn", "UND_latn", "mul-Hani", "und-Hani-TW",
                                       "zh-Hant", "und-1234")] == [
        "und-Latn", "und-Latn", "und-Hani", "und-Hani", "zh", None]
    valid = valid_language_subtags()
    assert {"yo", "bo", "haw", "de", "deu"} <= set(valid) and len(valid) > 7000
    assert not {"xx", "zzz", "qaa"} & set(valid)


def test_a_languages_scripts_split_the_cldr_ones_and_add_a_second_where_widely_used():
    from disembed.data.languages import language_scripts

    assert language_scripts("zh") == {"Hani"} and language_scripts("zh-Hant") == {"Hani"}
    assert language_scripts("ja") == {"Hani", "Hira", "Kana"}
    assert language_scripts("ko") == {"Hang", "Hani"}
    assert language_scripts("sr") == {"Cyrl", "Latn"} and language_scripts("de") == {"Latn"}
    assert language_scripts("deu") == {"Latn"} and language_scripts("si") == {"Sinh"}


def test_every_bundled_encoders_languages_are_known_codes():
    # The Tatoeba task normalises an encoder's declared languages; one unknown code there
    # (XLM-R's 'sd' once) made every e5-small evaluation fail.
    from disembed.data.languages import XLMR_LANGUAGES
    from disembed.encoders.usem3_encoder import USE_M3_LANGUAGES

    for code in sorted(XLMR_LANGUAGES):
        assert normalize_language(code) == code
    assert {normalize_language(code) for code in USE_M3_LANGUAGES} >= {"zh", "ar", "th"}
    assert normalize_language("snd") == "sd" and normalize_language("ory") == "or"
