"""The hard rules of a bitext filter: pure functions of one pair's two strings.

Each rule returns its reason (a short name, written in the scores file) when the pair
breaks it, else ``None``; :func:`rule_reason` applies them in :data:`RULES` order and
returns the first reason. The language rules (which need an identifier) and the meaning
cutoff are applied by :mod:`.filter`, after these, with the reasons :data:`UNTRANSLATED`,
:data:`WRONG_SRC`, :data:`WRONG_TGT` and :data:`LOW_MEANING` (and :data:`SWAPPED` before them).

* ``empty``: a side is blank.
* ``no_letters``: a side has no letter once URLs and e-mail addresses are removed (numbers,
  punctuation, a bare link).
* ``copy``: the two sides are the same text up to case, spaces and punctuation.
* ``length_ratio``: the longer side is more than ``max_ratio`` times the shorter, in length
  units where a Han, kana or Hangul character counts :data:`WIDE_CHAR_UNITS` (one such
  character carries about as much as three Latin letters); pairs whose longer side is under
  ``min_length`` units are not judged.
* ``numbers_differ``: both sides write numbers in digits (of any script, separators
  ignored), and different ones (a side that writes none may spell them out).
* ``urls_differ``: the sides hold different URLs or e-mail addresses.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ..util.text import is_blank, normalize_text

EMPTY, NO_LETTERS, COPY, LENGTH_RATIO = "empty", "no_letters", "copy", "length_ratio"
NUMBERS_DIFFER, URLS_DIFFER = "numbers_differ", "urls_differ"
UNTRANSLATED, WRONG_SRC, WRONG_TGT = "untranslated", "wrong_src_language", "wrong_tgt_language"
SWAPPED = "swapped_sides"
LOW_MEANING = "low_meaning"
#: every reason a pair may be dropped for, in the order they are checked
REASONS = (EMPTY, NO_LETTERS, COPY, LENGTH_RATIO, NUMBERS_DIFFER, URLS_DIFFER, SWAPPED,
           UNTRANSLATED, WRONG_SRC, WRONG_TGT, LOW_MEANING)
WIDE_CHAR_UNITS = 3

_URL = re.compile(r"(?:https?://|www\.)\S+|[\w.+-]+@[\w-]+\.[\w.-]+", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,\u00a0\u202f']\d+)*")
_WIDE = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")


@dataclass(frozen=True)
class RuleConfig:
    """Thresholds of the rules: ``max_ratio`` and ``min_length`` (length units) for
    ``length_ratio``. 2.0 is bicleaner-hardrules' default too; on the benchmark of
    docs/filtering.md it drops 9 of 1,600 true pairs and lifts F1 from 0.928 (3.0).

    ``coverage_weight`` and ``coverage_slack``: the soft length term subtracted from the
    meaning score (:mod:`.coverage`): ``weight * max(0, |z| - slack)``, ``z`` the pair's log
    length ratio in deviations from its chunk's language pair; 0 switches it off. Chosen
    on validation pairs that are not the benchmark's (``benchmarks/filter_coverage.py``,
    docs/filtering.md)."""

    max_ratio: float = 2.0
    min_length: int = 15
    coverage_weight: float = 0.1
    coverage_slack: float = 0.5

    def __post_init__(self) -> None:
        if not self.max_ratio > 1.0:
            raise ValueError(f"max_ratio must be above 1 (e.g. 3.0), got {self.max_ratio}")
        if self.min_length < 0:
            raise ValueError(f"min_length must be 0 or more, got {self.min_length}")
        if not (self.coverage_weight >= 0 and self.coverage_slack >= 0):
            raise ValueError(f"coverage_weight and coverage_slack must be 0 or more (0: no "
                             f"length-coverage term), got {self.coverage_weight} and "
                             f"{self.coverage_slack}")


def urls(text: str) -> frozenset[str]:
    """The URLs and e-mail addresses of ``text`` (trailing punctuation dropped)."""
    return frozenset(m.rstrip(".,;:!?)]}'\"").lower() for m in _URL.findall(text))


def numbers(text: str) -> frozenset[str]:
    """The numbers ``text`` writes, as digit strings (any script's digits, as ASCII;
    thousands separators and decimal marks dropped, so ``1,000`` and ``1.000`` agree)."""
    ascii_digits = "".join(str(unicodedata.digit(c)) if c.isdigit() else c for c in
                           _URL.sub(" ", text))
    return frozenset(re.sub(r"\D", "", m).lstrip("0") or "0"
                     for m in _NUMBER.findall(ascii_digits))


def has_letters(text: str) -> bool:
    """Whether ``text`` holds a letter outside its URLs and e-mail addresses."""
    return any(c.isalpha() for c in _URL.sub(" ", text))


def _skeleton(text: str) -> str:
    return "".join(c for c in normalize_text(text).casefold() if c.isalnum())


def length_units(text: str) -> int:
    """Characters of ``text`` (spaces aside), a Han, kana or Hangul one counting
    :data:`WIDE_CHAR_UNITS`."""
    units = 0
    for c in text:
        if c.isspace():
            continue
        wide = ord(c) > 0x2E7F and unicodedata.name(c, "").startswith(_WIDE)
        units += WIDE_CHAR_UNITS if wide else 1
    return units


def check_empty(src: str, tgt: str) -> str | None:
    return EMPTY if is_blank(src) or is_blank(tgt) else None


def check_letters(src: str, tgt: str) -> str | None:
    return None if has_letters(src) and has_letters(tgt) else NO_LETTERS


def check_copy(src: str, tgt: str) -> str | None:
    return COPY if _skeleton(src) == _skeleton(tgt) else None


def check_length(src: str, tgt: str, config: RuleConfig = RuleConfig()) -> str | None:
    a, b = sorted((length_units(src), length_units(tgt)))
    if b < config.min_length:
        return None
    return LENGTH_RATIO if b > config.max_ratio * max(a, 1) else None


def check_numbers(src: str, tgt: str) -> str | None:
    a, b = numbers(src), numbers(tgt)  # one side may spell a number out ("11" / "eleven")
    return NUMBERS_DIFFER if a and b and a != b else None


def check_urls(src: str, tgt: str) -> str | None:
    return URLS_DIFFER if urls(src) != urls(tgt) else None


RULES = {EMPTY: check_empty, NO_LETTERS: check_letters, COPY: check_copy,
         LENGTH_RATIO: check_length, NUMBERS_DIFFER: check_numbers, URLS_DIFFER: check_urls}


def rule_reason(src: str, tgt: str, config: RuleConfig = RuleConfig(),
                skip: frozenset[str] = frozenset()) -> str | None:
    """The first rule (:data:`RULES` order, those in ``skip`` aside) the pair breaks, or
    ``None``."""
    for name, rule in RULES.items():
        if name in skip:
            continue
        reason = rule(src, tgt, config) if name == LENGTH_RATIO else rule(src, tgt)
        if reason is not None:
            return reason
    return None
