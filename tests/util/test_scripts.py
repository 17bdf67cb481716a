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
