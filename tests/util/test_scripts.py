"""The script of a text (the script prior's input): the script of most of its letters."""

import unicodedata

import pytest

from disembed.util.scripts import SCRIPTS, UNKNOWN_SCRIPT, script_of, script_ranges, script_tag


@pytest.mark.parametrize("text,script", [
    ("Der Zug fährt um acht Uhr ab.", "Latn"), ("Поезд отправляется.", "Cyrl"),
    ("火车八点出发。", "Hani"), ("القطار يغادر في الثامنة", "Arab"), ("रेलगाड़ी आठ बजे", "Deva"),
    ("දුම්රිය පිටත් වේ", "Sinh"), ("Το τρένο φεύγει", "Grek"), ("רכבת יוצאת", "Hebr"),
    ("기차가 떠난다", "Hang"), ("ひらがな", "Hira"), ("ｶﾀｶﾅ", "Kana"), ("ＦＵＬＬ", "Latn"),
    ("བཀྲ་ཤིས་བདེ་ལེགས། ok", "Tibt"), ("Việt Nam", "Latn"),
    ("ꦗꦮ", "Java"),  # a script with a table word
    ("𐌰𐌱𐌲 a", UNKNOWN_SCRIPT),  # Gothic, no table word: counted as Zzzz, and it wins
])
def test_the_script_of_most_letters(text, script):
    assert script_of(text) == script


def test_no_letters_no_script():
    for text in ("", "123 456", "!!! ...", "\x00\t\n", "😀 👍", "٣٤٥"):
        assert script_of(text) is None and script_tag(text) is None
    assert script_tag("Hallo") == "und-Latn" and script_tag("你好") == "und-Hani"


def test_a_tie_goes_to_the_script_first_in_the_table_whatever_the_order_in_the_text():
    assert SCRIPTS.index("Latn") < SCRIPTS.index("Cyrl") < SCRIPTS.index("Hani")
    assert script_of("abc где") == script_of("где abc") == "Latn"
    assert script_of("中文 абвг") == script_of("абвг 中文 中文 ") != "Latn"
    assert script_of("中中 аб") == "Cyrl"  # 2 and 2: Cyrillic comes first


def test_one_script_for_every_unicode_form_and_control_character():
    for text in ("Việt Nam tiếng", "한국어 문장", "Größe ça", "ÅÄÖ"):
        forms = {unicodedata.normalize(f, text) for f in ("NFC", "NFD", "NFKC", "NFKD")}
        assert len({script_of(f) for f in forms}) == 1, text
    assert script_of("abc\x00где") == script_of("abc где")
    # Hangul in NFD is three letters a syllable; composed first, it is two against two
    assert script_of(unicodedata.normalize("NFD", "한국 ab")) == script_of("한국 ab") == "Latn"


def test_the_ranges_cover_exactly_the_letters():
    starts, ends, scripts = script_ranges()
    assert len(starts) == len(ends) == len(scripts) > 100
    assert all(s <= e < n for s, e, n in zip(starts, ends, [*starts[1:], 0x110000],
                                              strict=True))
    letters = sum(e - s + 1 for s, e in zip(starts, ends, strict=True))
    assert letters == sum(chr(c).isalpha() for c in range(0x110000))


def test_invisible_hangul_fillers_are_no_korean_letters():
    """Issue 48: U+3164, U+115F, U+1160 and U+FFA0 show nothing; counted as Hangul, three of
    them made ``ab`` Korean (and routed a Latin text to Korean alone)."""
    for filler in ("\u3164", "\u115f", "\u1160", "\uffa0"):
        assert script_of(filler * 5) is None, hex(ord(filler))
        assert script_of(filler * 5 + "ab") == "Latn", hex(ord(filler))
    assert script_of("\u3164\u3164 한국") == "Hang"  # real Hangul still is


def test_mathematical_and_enclosed_latin_is_latin():
    """Issue 48: mathematical bold ``𝐇𝐞𝐥𝐥𝐨`` was ``Zzzz`` (an unknown script); letters are
    read NFKC-folded for the script (the text embedded is unchanged)."""
    assert script_of("𝐇𝐞𝐥𝐥𝐨 𝐰𝐨𝐫𝐥𝐝") == "Latn"
    assert script_of("𝓗𝓮𝓵𝓵𝓸 𝔴𝔬𝔯𝔩𝔡 Ⓐⓑ") == "Latn"
    assert script_of("𝐇𝐞𝐥𝐥𝐨 мир") == "Latn"  # 5 folded Latin letters to 3 Cyrillic


@pytest.mark.parametrize("code, script", [("und-Hani", "Hani"), ("mul_hani", "Hani"),
                                          ("und-Hani-TW", "Hani"), ("UND-LATN", "Latn"),
                                          ("und", None), ("und-TW", None), ("und-12ab", None),
                                          ("zh-Hant", None), (None, None)])
def test_the_script_a_tag_names(code, script):
    from disembed.data.languages import normalize_tag, script_subtag

    assert script_subtag(code) == script
    if code is not None and script is not None:
        assert script_subtag(normalize_tag(code)) == script
