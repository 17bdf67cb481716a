"""How each row of a call is routed through a language-dependent recipe: the part of
:class:`~.base.Disentangler` that reads language codes, runs the language identifier and
calibrates new languages.

Languages, the same for every recipe (:func:`resolving` wraps each recipe's ``meaning``,
``language`` and ``views``, see :meth:`~.base.Disentangler.__init_subclass__`, so a recipe
only ever sees canonical codes of rows it can handle):

* every code goes through :func:`~disembed.data.languages.normalize_language` (``deu``,
  ``de-DE``, ``DE`` and ``deu_Latn`` are ``de``; an unknown code is a ``ConfigError``);
* ``languages`` may be ``None`` (predict every row), one code for all rows, or one code per
  row with ``None`` entries predicted;
* a row without a tag is the mixture of every language's route weighted by the
  identifier's tempered posterior over the languages its script allows (:mod:`.routing`,
  :mod:`disembed.util.routing_rule`), never a hard argmax, so the meaning is continuous in
  the embedding; the identifier runs once per call (:meth:`LanguageRouting.routing`);
* a language the model never saw gets its ``unknown_language`` fallback, row by row:
  ``"global"``, ``"nearest"`` (the identifier's mixture) or ``"error"``;
  :meth:`LanguageRouting.calibrate` adds a language from unlabeled sentences of it.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Sequence

import numpy as np

from ..data.languages import normalize_language, normalize_tag, script_subtag
from ..exceptions import ConfigError, DataError, ShapeError
from ..util.text import text_list
from .export_map import GLOBAL_ROUTE
from .language_id import UNKNOWN, LanguageIdentifier, LanguagePrediction
from .routing import Routing
from .text_path import reported_languages

logger = logging.getLogger(__name__)

Languages = str | Sequence[str | None] | None


def as_language_array(languages: Languages, n: int) -> np.ndarray:
    """One language code per row: broadcast a single code (or ``None``), check a sequence's
    length."""
    if languages is None or isinstance(languages, str):
        return np.full(n, languages, dtype=object)
    arr = np.asarray(text_list(languages, "languages", "language codes"), dtype=object)
    if arr.shape != (n,):
        raise ShapeError(f"got {arr.shape[0] if arr.ndim else 0} language codes for {n} rows; "
                         "give one code per row or a single code for all")
    return arr


def normalize_languages(languages: Languages, n: int) -> np.ndarray:
    """``(n,)`` object array of canonical codes (``None`` kept; BCP-47's ``und`` and ``mul``,
    no one language, become ``None``: :func:`~disembed.data.languages.normalize_tag`;
    ``"unknown"``, what :meth:`Disentangler.predict_language` answers far from every known
    language, is kept and gets the unseen-language fallback), each distinct code normalised
    once."""
    arr = as_language_array(languages, n)

    def canonical_of(code):
        return UNKNOWN if code == UNKNOWN else normalize_tag(code)

    canonical = {code: canonical_of(code) for code in set(arr.tolist())}
    return np.array([canonical[code] for code in arr.tolist()], dtype=object).reshape(n)


def resolving(fn):
    """Wrap a recipe's ``meaning``/``language``/``views`` so it gets canonical codes: one
    call per route, mixed for rows without a tag (:meth:`Disentangler.routing`,
    :meth:`Disentangler.routed`)."""
    @functools.wraps(fn)
    def wrapper(self, X, languages=None, *args, **kwargs):
        X = self._check(X)
        return self._run_routed(fn, X, self.routing(X, languages), *args, **kwargs)

    wrapper._disembed_wraps = "routes"  # type: ignore[attr-defined]
    return wrapper


class LanguageRouting:
    """Routing, identification and calibration (mixed into :class:`~.base.Disentangler`,
    whose ``name``, ``uses_language``, ``_check`` and ``_calibrate`` it reads)."""

    @property
    def language_identifier(self) -> Any:
        """The language identifier fitted with the model (on its raw training embeddings),
        or ``None``: a recipe that uses no language, or a model saved before it had one."""
        return getattr(self, "language_id_", None)

    def known_languages(self) -> list[str]:
        """The languages this model has a route for (trained or calibrated)."""
        lid = getattr(self, "language_id_", None)
        return sorted(set(getattr(self, "languages_", [])) | set(lid.languages_ if lid else []))

    def predict_language(self, X: np.ndarray) -> LanguagePrediction:
        """The language of each row of raw embeddings ``X (n, d)``, as the model's language
        identifier sees it ("unknown" where a row is far from every known language)."""
        X = self._check(X)
        return self._identifier().predict(X)

    def routing(self, X: np.ndarray, languages: Languages) -> Routing:
        """How each row of raw embeddings ``X (n, d)`` is routed (:mod:`.routing`): a tagged
        row by its canonical tag (a tag the model never saw by the recipe's
        ``unknown_language`` fallback); a row without a tag, and an unseen tag where the
        fallback is ``"nearest"``, by the mixture of every language's route weighted by the
        language identifier's tempered posterior over the languages its script allows
        (:func:`~disembed.util.routing_rule.route_weights`). The identifier runs once, on
        the rows that need it; its logits stay in the routing for the reported language."""
        langs = normalize_languages(languages, len(X))
        if not self.uses_language:
            return Routing.hard(np.array([None if script_subtag(x) else x
                                          for x in langs.tolist()], dtype=object))
        missing = np.array([x is None or script_subtag(x) is not None for x in langs.tolist()],
                           dtype=bool)
        mixed = missing.copy()
        if self.unknown_policy == "nearest" and self.language_identifier is not None:
            known = set(self.known_languages())
            mixed |= np.array([x is not None and x not in known for x in langs.tolist()])
        if not mixed.any():
            return Routing.hard(langs)
        lid = self._identifier()
        scripts = tuple(script_subtag(x) for x in langs[mixed].tolist())
        scores = lid.logits(X[mixed])  # the one pass of the identifier
        weights = lid.route_weights(X[mixed], lid.allowed_for_scripts(scripts), scores=scores)
        if missing.any():
            best = np.asarray(lid.languages_, dtype=object)[weights.argmax(axis=1)]
            values, counts = np.unique(best.astype(str), return_counts=True)
            logger.info("%s: no language given for %d row(s): each is the mixture of the "
                        "routes of the languages it may be in, weighted by the identifier "
                        "(most likely: %s; mean confidence %.2f)", self.name,
                        int(missing.sum()), dict(zip(values.tolist(), counts.tolist(),
                                                     strict=True)),
                        float(weights.max(axis=1).mean()))
        return Routing(langs, mixed, weights, tuple(lid.languages_), scores, scripts)

    def routed(self, part: str, X: np.ndarray, routing: Routing) -> Any:
        """The recipe's ``part`` (``"meaning"`` or ``"language"``) of raw embeddings
        ``X (n, d)`` under a :meth:`routing` computed already (the text path computes it
        once for the vectors and the reported language)."""
        X = self._check(X)
        fn = getattr(type(self), part)
        inner = getattr(fn, "__wrapped__", None)
        if inner is not None and getattr(fn, "_disembed_wraps", None) == "routes":
            return self._run_routed(inner, X, routing)
        if part == "views":  # the base's: the two parts, under this one routing
            out = {"meaning": self.routed("meaning", X, routing)}
            lang = self.routed("language", X, routing)
            return out if lang is None else {**out, "language": lang}
        return fn(self, X, routing.codes)  # the base's language: no language part

    def _run_routed(self, fn, X: np.ndarray, routing: Routing, *args, **kwargs) -> Any:
        """``fn(self, rows, code)`` once per route, mixed for the mixed rows."""
        return routing.apply(lambda rows, code: fn(self, X if rows is None else X[rows], code,
                                                   *args, **kwargs), len(X))

    def _identifier(self) -> LanguageIdentifier:
        """The language identifier, or a clear error for a model without one."""
        lid = self.language_identifier
        if lid is None:
            raise ConfigError(f"this {self.name} model has no language identifier: "
                              + ("it uses no language, so none is needed" if not
                                 self.uses_language else "it was saved by an older disembed; "
                                 "refit it, or give the language of every row"))
        return lid

    def resolve_languages(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        """``(n,)`` the code each row is reported as: its canonical tag, or for a row the
        model routes by the identifier, :func:`~.text_path.reported_languages`' code (the
        most likely language its script allows, or ``und`` / ``und-<Script>`` where
        unsure). ``meaning`` does not route by these codes:
        such a row is a mixture."""
        codes, _ = reported_languages(self.routing(X, languages), self.language_identifier)
        return np.array(codes, dtype=object).reshape(len(X))

    @property
    def unknown_policy(self) -> str:
        """What a language the model never saw gets (its ``unknown_language``)."""
        return str(getattr(self, "unknown_language", "nearest"))

    def unseen_route(self) -> str:
        """What an exported model does with a language tag it has no route for, as
        :meth:`meaning` does: the name of a :meth:`meaning_map` route (``"global"``: the
        mean over the training languages), ``"mixture"`` (the identifier's mixture, as for
        an untagged row: ``unknown_language="nearest"``) or ``"error"``."""
        policy = self.unknown_policy
        if policy in ("nearest", "error"):
            return "mixture" if policy == "nearest" else "error"
        return GLOBAL_ROUTE

    def calibrate(self, X: np.ndarray, language: str, *,
                  check_language: bool = True) -> Any:
        """Add language ``language`` from raw embeddings ``X (n, d)`` of unlabeled sentences
        of it: the recipe's route for it (:meth:`_calibrate`, e.g. its mean) and the
        language identifier's class. Returns ``self``.

        Calibrating a language the model already knows replaces what training fitted for
        it, so the sentences must be of that language: with ``check_language`` (the
        default) the language identifier must find at least half of them to be
        ``language``, else a :class:`~disembed.exceptions.DataError` says what they look
        like (German given Chinese text no longer replaces the German mean)."""
        X = self._check(X)
        code = normalize_language(language)
        if not self.uses_language:
            raise ConfigError(f"{self.name} uses no language, so there is nothing to calibrate;"
                              " its meaning is the same for every language")
        if len(X) < 2:
            raise ConfigError(f"calibrate needs at least 2 sentences of {code!r}, got {len(X)}")
        if code in self.known_languages():
            self._check_replacement(X, code, check_language)
        self._calibrate(X, code)
        if getattr(self, "language_id_", None) is not None:
            self.language_id_.add_language(code, X)
        # recorded: a calibrated language is appended to the sorted languages fit saved,
        # and a load tells it from a reordered list by this (config_checks)
        meta = dict(getattr(self, "metadata_", None) or {})
        self.metadata_ = {**meta, "calibrated": {**(meta.get("calibrated") or {}),
                                                 code: {"sentences": len(X)}}}
        logger.info("%s: calibrated %r from %d sentences", self.name, code, len(X))
        return self

    def _check_replacement(self, X: np.ndarray, code: str, check: bool) -> None:
        """Sentences that replace a known language's statistics must be of it (see
        :meth:`calibrate`)."""
        lid = self.language_identifier
        if not check or lid is None:
            logger.warning("%s: calibrating %r replaces what training fitted for it (%s)",
                           self.name, code, "language check skipped" if not check else
                           "not checked: the model has no language identifier")
            return
        pred = lid.predict(X)
        share = float(np.mean(pred.codes.astype(str) == code))
        if share < 0.5:
            found = ", ".join(f"{k}: {v}" for k, v in sorted(pred.summary().items(),
                                                            key=lambda kv: -kv[1]))
            raise DataError(
                f"{self.name} knows {code!r} from training, and calibrating it would replace "
                f"that; but its language identifier finds only {share:.0%} of these "
                f"{len(X)} sentences to be {code!r} ({found}). Give sentences of {code!r}, "
                "or (if they are) skip this check (check_language=False / "
                "--skip-language-check)")
        logger.warning("%s: calibrating %r replaces what training fitted for it (%.0f%% of "
                       "the sentences identified as %r)", self.name, code, 100 * share, code)

    def _calibrate(self, X: np.ndarray, code: str) -> None:
        """Give language ``code`` a route from its raw embeddings ``X (n, d)``."""
        raise ConfigError(f"{self.name} cannot be calibrated to a new language (it has no "
                          "per-language statistic to add); its unknown-language fallback "
                          f"({self.unknown_policy}) applies")

