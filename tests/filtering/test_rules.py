"""Every drop reason: each rule fires on the pair it is for and stays quiet on a good
translation (including ones that look like it: numbers spelled alike, a short pair, CJK)."""

from __future__ import annotations

import numpy as np
import pytest

from disembed.filtering.language_check import is_wrong
from disembed.filtering.rules import (
    COPY,
    EMPTY,
    LENGTH_RATIO,
    NO_LETTERS,
    NUMBERS_DIFFER,
    REASONS,
    UNTRANSLATED,
    URLS_DIFFER,
    WRONG_SRC,
    WRONG_TGT,
    RuleConfig,
    length_units,
    numbers,
    rule_reason,
)
from disembed.filtering.scoring import language_reason, majority_language

GOOD = [("Das Haus ist rot.", "The house is red."),
        ("Ich habe 1.000 Euro.", "I have 1,000 euros."),
        ("Siehe https://example.org/a.", "See https://example.org/a"),
        ("我很好。", "I am fine."),
        ("Ja.", "Yes, it is."),
        ("Er ist ٣ Jahre alt.", "He is 3 years old."),
        ("Es ist schon 11 Uhr.", "It's already eleven.")]  # a number spelled out


@pytest.mark.parametrize("src,tgt", GOOD)
def test_good_pairs_break_no_rule(src, tgt):
    assert rule_reason(src, tgt) is None


@pytest.mark.parametrize("src,tgt,reason", [
    ("Das Haus ist rot.", "  ", EMPTY),
    ("12 345", "12 345", NO_LETTERS),
    ("https://example.org/x", "https://example.org/x", NO_LETTERS),
    ("Das Haus ist rot.", "das haus ist rot", COPY),
    ("Guten Morgen, wie geht es dir heute?", "Hi.", LENGTH_RATIO),
    ("Ich habe 3 Katzen.", "I have 4 cats.", NUMBERS_DIFFER),
    ("Mail an a@b.de bitte.", "Mail c@d.com please.", URLS_DIFFER),
])
def test_each_rule_fires_with_its_reason(src, tgt, reason):
    assert rule_reason(src, tgt) == reason
    assert reason in REASONS


def test_rules_apply_in_order_and_can_be_skipped():
    assert rule_reason("123", "123") == NO_LETTERS  # also a copy: the first reason wins
    assert rule_reason("Ich habe 3.", "Ich habe 3.", skip=frozenset({COPY})) is None


def test_length_units_count_wide_characters_three_times():
    assert length_units("猫 cat") == 3 + 3
    # a Chinese sentence is not a length outlier of its English translation
    zh, en = "我今天早上在公园里看见了一只猫。", "This morning I saw a cat in the park."
    assert rule_reason(zh, en) is None
    assert rule_reason("a" * 10, "b" * 40, RuleConfig(max_ratio=5.0)) is None
    assert rule_reason("a" * 10, "b" * 40, RuleConfig(max_ratio=3.0)) == LENGTH_RATIO


def test_numbers_agree_across_separators_and_scripts():
    assert numbers("1.000 und ٢") == numbers("1,000 and 2") == {"1000", "2"}


def test_language_reasons():
    assert language_reason("Das Haus.", "Das Haus!", "de", "de", "de", "en") == UNTRANSLATED
    assert language_reason("Das Haus.", "La casa.", "de", "es", "de", "en") == WRONG_TGT
    assert language_reason("La casa.", "The house.", "es", "en", "de", "en") == WRONG_SRC
    assert language_reason("Das Haus.", "The house.", "de", "en", "de", "en") is None
    # an unknown language is not "wrong" unless its script rules the expected one out
    assert language_reason("Das Haus.", "The house.", "de", "unknown", "de", "en") is None
    assert is_wrong("und-Grek", "en", "Καλημέρα κόσμε")
    assert not is_wrong("und-Grek", "el", "Καλημέρα κόσμε")
    assert not is_wrong("fr", None, "Bonjour")
    # far from every language the identifier knows: wrong only where it knows the expected
    assert is_wrong("unknown", "en", "Ben je niet moe?", frozenset({"de", "en"}))
    assert not is_wrong("unknown", "nl", "Ben je niet moe?", frozenset({"de", "en"}))
    # a Chinese sentence with a Latin name, routed by its majority script: not wrong
    assert not is_wrong("en", "zh", "我叫Jack。") and is_wrong("en", "zh", "My name is Jack.")
    assert is_wrong("en", "de", "Look at me.")  # same script: the identifier decides


def test_majority_language_ignores_unknown_and_script_only_codes():
    assert majority_language(np.array(["unknown", "de", "und-Latn", "de", "en", "unknown"],
                                      dtype=object).tolist()) == "de"
    assert majority_language(["unknown"]) is None
