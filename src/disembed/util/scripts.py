"""The writing system of a text: the ISO 15924 script of most of its letters.

An untagged row is routed by the language identifier's posterior, restricted to the
languages that write the text's script (:mod:`disembed.methods.routing`): a Chinese
sentence then takes the routes of languages written in Han only, whatever the
identifier's tail on its embedding says. The script is a function of the text alone, so
it changes no vector's continuity in the embedding.

A letter (``str.isalpha``) belongs to the script named by the first word of its Unicode
name found in :data:`SCRIPT_WORDS` (``LATIN SMALL LETTER E`` -> Latn, ``FULLWIDTH LATIN
...`` -> Latn, ``HALFWIDTH KATAKANA ...`` -> Kana, ``CJK UNIFIED IDEOGRAPH-4E2D`` -> Hani);
a letter of any other script counts for :data:`UNKNOWN_SCRIPT` (``Zzzz``), which can win:
a Tibetan sentence with one Latin word is not called Latin. Ties go to the script first
in :data:`SCRIPTS`. Letters are read NFKC-folded, so a text's NFC and NFD forms have one
script and mathematical bold Latin is Latin; the invisible Hangul fillers are no letters
(:mod:`.routing_rule`, which counts them).

:func:`script_ranges` is the whole table as code point ranges, built once from Python's
``unicodedata``; an export carries it and the routing rule's file itself, so the exported
model finds the same script as the library without disembed.
"""

from __future__ import annotations

import functools

from . import routing_rule

#: the first word of a letter's Unicode name -> its ISO 15924 script
SCRIPT_WORDS = {
    "LATIN": "Latn", "CYRILLIC": "Cyrl", "GREEK": "Grek", "ARMENIAN": "Armn",
    "GEORGIAN": "Geor", "HEBREW": "Hebr", "ARABIC": "Arab", "SYRIAC": "Syrc",
    "THAANA": "Thaa", "NKO": "Nkoo", "DEVANAGARI": "Deva", "BENGALI": "Beng",
    "GURMUKHI": "Guru", "GUJARATI": "Gujr", "ORIYA": "Orya", "TAMIL": "Taml",
    "TELUGU": "Telu", "KANNADA": "Knda", "MALAYALAM": "Mlym", "SINHALA": "Sinh",
    "THAI": "Thai", "LAO": "Laoo", "TIBETAN": "Tibt", "MYANMAR": "Mymr", "KHMER": "Khmr",
    "MONGOLIAN": "Mong", "ETHIOPIC": "Ethi", "CHEROKEE": "Cher", "CANADIAN": "Cans",
    "TIFINAGH": "Tfng", "HANGUL": "Hang", "HIRAGANA": "Hira", "KATAKANA": "Kana",
    "CJK": "Hani", "BOPOMOFO": "Bopo", "YI": "Yiii", "JAVANESE": "Java",
    "BALINESE": "Bali", "SUNDANESE": "Sund", "ADLAM": "Adlm", "VAI": "Vaii",
    "COPTIC": "Copt", "GLAGOLITIC": "Glag", "RUNIC": "Runr", "OGHAM": "Ogam",
}
#: the script of a letter no word of :data:`SCRIPT_WORDS` names (ISO 15924's "uncoded")
UNKNOWN_SCRIPT = "Zzzz"
#: every script :func:`script_of` returns, in tie-break order
SCRIPTS = (*dict.fromkeys(SCRIPT_WORDS.values()), UNKNOWN_SCRIPT)


@functools.lru_cache(maxsize=1)
def script_ranges() -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(starts, ends, scripts)``: every run of letters of one script, as inclusive code
    point ranges ``starts[i]..ends[i]`` with the index in :data:`SCRIPTS` of their script
    (about 700 runs; built once, in about half a second)."""
    import unicodedata

    index = {word: SCRIPTS.index(script) for word, script in SCRIPT_WORDS.items()}
    unknown = len(SCRIPTS) - 1
    starts: list[int] = []
    ends: list[int] = []
    scripts: list[int] = []
    for cp in range(0x110000):
        ch = chr(cp)
        if not ch.isalpha():
            continue
        name = unicodedata.name(ch, "")
        s = index.get(name[: name.find(" ")])  # the first word, mostly
        if s is None:
            s = next((index[w] for w in name.split() if w in index), unknown)
        if starts and ends[-1] == cp - 1 and scripts[-1] == s:
            ends[-1] = cp
        else:
            starts.append(cp)
            ends.append(cp)
            scripts.append(s)
    return tuple(starts), tuple(ends), tuple(scripts)


def script_of(text: str) -> str | None:
    """The ISO 15924 script of most of ``text``'s letters (``None``: no letter): the routing
    rule's :func:`~.routing_rule.script_of` over this module's table."""
    return routing_rule.script_of(text, SCRIPTS, script_ranges())


def script_tag(text: str) -> str | None:
    """The per-row tag of an untagged text: BCP-47's "undetermined language, this script"
    (``und-Hani``), or ``None`` for a text without letters."""
    script = script_of(text)
    return None if script is None else f"und-{script}"
