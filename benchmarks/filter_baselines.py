"""The field's rule filters for benchmarks/bench_filter.py, run from their own packages.

* OpusFilter 3.3.1 (``pip install opusfilter``): LengthRatioFilter, CharacterScoreFilter,
  TerminalPunctuationFilter and NonZeroNumeralsFilter as shipped. Its LangidFilter needs
  ``py3langid.LanguageIdentifier.from_pickled_model``, which py3langid 0.4 no longer has,
  so its ``confidence`` (the normalised probability of the expected language, 0 when
  another one wins, accepted above 0) is re-run here on langid 1.1.6.
* bicleaner-hardrules 2.9.0 (``pip install --no-deps bicleaner-hardrules sacremoses``; its
  fasttext 0.9.2 dependency does not build here): the ``Hardrules`` class as shipped, with
  the language model, porn removal and FastSpell language identification disabled (the
  modules they import, ``kenlm``, ``fastspell``, ``toolwrapper``, are stubbed: unused).
"""

from __future__ import annotations

import sys
import types
from argparse import Namespace

import numpy as np

SCRIPTS = {"de": "Latin", "ru": "Cyrillic", "zh": "Han", "ar": "Arabic", "en": "Latin",
           "fr": "Latin", "tr": "Latin", "el": "Greek", "he": "Hebrew", "uk": "Cyrillic"}


def _langid_confidence():
    from langid.langid import LanguageIdentifier, model
    lid = LanguageIdentifier.from_modelstring(model, norm_probs=True)

    def confidence(sentence: str, lang: str) -> float:  # OpusFilter's LangidFilter logic
        if not sentence:
            return 1.0
        got, conf = lid.classify(sentence)
        return conf if got == lang else 0.0
    return confidence


def opusfilter_scores(src: list[str], tgt: list[str], lang) -> tuple[np.ndarray, np.ndarray]:
    """``(score, all filters pass)`` per pair; score: filters passed + mean langid
    confidence / 10 (a tie-breaker, for AUC)."""
    from opusfilter.filters import (
        CharacterScoreFilter,
        LengthRatioFilter,
        NonZeroNumeralsFilter,
        TerminalPunctuationFilter,
    )
    confidence = _langid_confidence()
    score = np.zeros(len(src))
    passed = np.zeros(len(src), bool)
    for x in sorted(set(lang)):
        rows = np.flatnonzero(np.asarray(lang) == x)
        pairs = [(src[i], tgt[i]) for i in rows]
        units = ["char", "word"] if x == "zh" else ["char", "char"]  # CJK: characters
        filters = [LengthRatioFilter(threshold=3, unit=units),
                   CharacterScoreFilter(scripts=[SCRIPTS[x], "Latin"]),
                   TerminalPunctuationFilter(), NonZeroNumeralsFilter()]
        ok = np.ones(len(rows), bool)
        n = np.zeros(len(rows))
        for f in filters:
            acc = np.array([f.accept(s) for s in f.score(pairs)], bool)
            ok &= acc
            n += acc
        conf = np.array([[confidence(s, x), confidence(t, "en")] for s, t in pairs])
        lid = (conf > 0).all(axis=1)
        score[rows] = n + lid + conf.mean(axis=1) / 10
        passed[rows] = ok & lid
    return score, passed


def _hardrules(src_lang: str, tgt_lang: str):
    for name in ("fastspell", "kenlm", "toolwrapper"):
        if name not in sys.modules:
            stub = types.ModuleType(name)
            stub.FastSpell = stub.ToolWrapper = None
            sys.modules[name] = stub
    from hardrules.hardrules import Hardrules
    return Hardrules(Namespace(
        disable_lm_filter=True, disable_porn_removal=True, disable_lang_ident=True,
        source_lang=src_lang, target_lang=tgt_lang, run_all_rules=False,
        disable_minimal_length=False, rules_config=None, lm_threshold=0.5, metadata_yaml=None))


def bicleaner_rules(src: list[str], tgt: list[str], lang) -> np.ndarray:
    """``(p,) bool``: the pair passes every bicleaner hard rule (module docstring)."""
    out = np.zeros(len(src), bool)
    for x in sorted(set(lang)):
        rules = _hardrules(x, "en")
        for i in np.flatnonzero(np.asarray(lang) == x):
            out[i] = not rules.wrong_tu(src[i], tgt[i])
    return out
