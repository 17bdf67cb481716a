"""Which language each side of a pair is in: the model's own identifier, or langid.

A check maps distinct texts (and their raw embeddings, ``X (n, d)``) to one code each:

* :class:`ModelLanguageCheck` (``"model"``): the saved model's language identifier on the
  raw embedding, restricted to the training languages that write the text's script: the
  most likely of them however sure (the text path's report says ``und-<Script>`` below its
  probability threshold; the filter needs the identifier's best guess to compare with the
  expected language). A
  text whose script no training language writes is reported as ``und-<Script>``, and one the
  identifier finds far from every language it knows as ``unknown``: neither is a known
  language, so neither is called "wrong" unless its script alone rules the expected
  language out.
* :class:`LangidCheck` (``"langid"``): the langid.py identifier (Lui & Baldwin 2012; 97
  languages, offline, ``pip install "disembed[filter]"``), optionally restricted to a set of
  candidate languages.

:func:`is_wrong` decides whether an identified code contradicts the expected language: a
known code that differs from it, or a text written in a script the expected language never
uses.
"""

from __future__ import annotations

import bisect
import logging
from typing import Protocol, Sequence

import numpy as np

from ..data.languages import language_scripts, normalize_language
from ..exceptions import ConfigError, MissingDependencyError
from ..methods.routing import tags_with_scripts
from ..util.routing_rule import reported_languages, script_subtag
from ..util.scripts import SCRIPTS, script_of, script_ranges

logger = logging.getLogger(__name__)

UNKNOWN = "unknown"
CHECKS = ("model", "langid")


class LanguageCheck(Protocol):
    name: str

    def identify(self, texts: Sequence[str], X: np.ndarray | None) -> np.ndarray:
        """``(n,) object`` one code per text."""


class ModelLanguageCheck:
    """The model's identifier (module docstring); ``model``: a fitted disentangler."""

    name = "model"

    def __init__(self, model) -> None:
        if getattr(model, "language_identifier", None) is None:
            raise ConfigError(f"the {model.name} model has no language identifier, so it "
                              "cannot check languages; use --language-check langid, or a "
                              "model that uses languages")
        self.model = model
        self.known = frozenset(model.language_identifier.languages_)

    def identify(self, texts: Sequence[str], X: np.ndarray | None) -> np.ndarray:
        if X is None:
            raise ConfigError("the model's language check needs the texts' embeddings")
        lid = self.model.language_identifier
        scripts = [script_subtag(t) for t in tags_with_scripts(list(texts), None)]
        # the most likely language the script allows, however sure: the report's
        # threshold (REPORT_THRESHOLD) makes an unsure text "und-<Script>", which the rules
        # cannot hold against the expected language, so copies and third-language targets
        # of a Latin-script pair would pass as "not known to be wrong"
        tags, _ = reported_languages(lid.logits(X), lid.languages_, scripts,
                                     lid.language_scripts(), threshold=0.0)
        codes = np.asarray(tags, dtype=object)
        far = self.model.predict_language(X).codes == UNKNOWN
        known = {s for code in lid.languages_ for s in language_scripts(code)}
        for i, text in enumerate(texts):
            script = script_of(text)
            if script is not None and script not in known:
                codes[i] = f"und-{script}"
            elif far[i]:
                codes[i] = UNKNOWN
        return codes


class LangidCheck:
    """langid.py (module docstring); ``languages``: candidate codes (``None``: all 97)."""

    name = "langid"
    known: frozenset[str] | None = None  # langid never answers "unknown"

    def __init__(self, languages: Sequence[str] | None = None) -> None:
        try:
            from langid.langid import LanguageIdentifier, model
        except ImportError:
            raise MissingDependencyError(
                "the langid language check needs langid: pip install \"disembed[filter]\"",
            ) from None
        self._lid = LanguageIdentifier.from_modelstring(model, norm_probs=False)
        if languages:
            own = set(self._lid.nb_classes)
            wanted = sorted({normalize_language(x) for x in languages} & own)
            if wanted:
                self._lid.set_languages(wanted)

    def identify(self, texts: Sequence[str], X: np.ndarray | None = None) -> np.ndarray:
        out = np.empty(len(texts), dtype=object)
        for i, text in enumerate(texts):
            code = self._lid.classify(text)[0]
            try:
                out[i] = normalize_language(code)
            except ConfigError:
                out[i] = UNKNOWN
        return out


def make_check(name: str, model=None, languages: Sequence[str] | None = None
               ) -> LanguageCheck | None:
    """The check named ``name`` (:data:`CHECKS`, ``"none"``, or ``"auto"``: the model's
    identifier where ``model`` has one, else langid where it is installed, else none)."""
    if name == "auto":
        if model is not None and getattr(model, "language_identifier", None) is not None:
            name = "model"
        else:
            try:
                import langid  # noqa: F401
                name = "langid"
            except ImportError:
                logger.warning("no language check: the model has no identifier and langid "
                               "is not installed (pip install \"disembed[filter]\")")
                return None
    if name == "none":
        return None
    if name == "model":
        if model is None:
            raise ConfigError("--language-check model needs a model (--model DIR); without "
                              "one, use --language-check langid or none")
        return ModelLanguageCheck(model)
    if name == "langid":
        return LangidCheck(languages)
    raise ConfigError(f"language check must be one of {(*CHECKS, 'none', 'auto')}, got "
                      f"{name!r}")


def writes_script(text: str, scripts: frozenset[str]) -> bool:
    """Whether ``text`` holds a letter of one of ``scripts`` (ISO 15924)."""
    starts, ends, index = script_ranges()
    wanted = {SCRIPTS.index(x) for x in scripts if x in SCRIPTS}
    for ch in text:
        i = bisect.bisect_right(starts, ord(ch)) - 1
        if i >= 0 and ord(ch) <= ends[i] and index[i] in wanted:
            return True
    return False


def is_wrong(code: str, expected: str | None, text: str,
             known: frozenset[str] | None = None) -> bool:
    """Whether ``code`` (identified for ``text``) contradicts the ``expected`` language:

    * a text the identifier places far from every language it knows (``unknown``) is wrong
      where it knows ``expected`` (in ``known``), so would have recognised it;
    * a script-only code (``und-Grek``) or ``unknown`` is wrong where the text is written in
      a script ``expected`` never uses;
    * a known code is wrong where it differs from ``expected``, unless the two languages
      write different scripts and the text holds letters of ``expected``'s script (a
      Chinese sentence with an English name in it is routed by its majority script, Latin).
    """
    if expected is None:
        return False
    scripts = language_scripts(expected)
    if code == UNKNOWN and known and expected in known:
        return True
    if code.startswith("und-") or code == UNKNOWN:
        script = script_of(text)
        return script is not None and bool(scripts) and script not in scripts
    if code == expected:
        return False
    return not (scripts and not scripts & language_scripts(code)
                and writes_script(text, scripts))
