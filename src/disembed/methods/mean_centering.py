"""``mean-centering``: subtract a per-language mean (Libovický et al. 2020; used as a
baseline by DREAM, MEAT and SEED).

    m = e - mu_lang,    l = mu_lang

``mu_lang`` is the mean embedding of language ``lang`` over the training pairs
(both sides contribute). Without a tag the model's language identifier names
``lang`` (:mod:`.base`). For a language not seen in training, ``unknown_language``
decides, row by row: ``"global"`` (default) uses the mean over all training
languages, ``"nearest"`` the mean of the training language the identifier finds closest
to the row, ``"error"`` raises (``global`` was chosen on validation data:
docs/language_free.md, "point 6"). :meth:`~.base.Disentangler.calibrate` adds a
language's mean from unlabeled sentences of it. Centring by the rows of a call
(transductive) is no policy of the model: ask for it by name over a whole corpus
(``mine --center corpus``).
"""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np

from ..exceptions import CheckpointError, ConfigError
from .base import Disentangler, Languages, as_language_array, fitting, resolving
from .export_map import MeaningMap, centering_routes

logger = logging.getLogger(__name__)


UNKNOWN_LANGUAGE_POLICIES = ("nearest", "global", "error")


def check_unknown_language(policy: str) -> None:
    """Raise ``ConfigError`` unless ``policy`` is one of :data:`UNKNOWN_LANGUAGE_POLICIES`."""
    if policy not in UNKNOWN_LANGUAGE_POLICIES:
        hint = (" ('batch', centring by the rows of the call, was removed: a sentence's "
                "meaning must not depend on the rest of the call)" if policy == "batch" else "")
        raise ConfigError("unknown_language must be 'nearest', 'global' or 'error'; "
                          f"got {policy!r}{hint}")


class MeanCentering(Disentangler):
    method = "mean-centering"
    paper = ("Libovický, Rosa, Fraser. *On the Language Neutrality of Pre-trained Multilingual "
             "Representations.* Findings of EMNLP 2020 (arXiv:2004.05160)")
    uses_language = True

    def __init__(self, unknown_language: Literal["nearest", "global", "error"] = "global") -> None:
        check_unknown_language(unknown_language)
        self.unknown_language = unknown_language

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "MeanCentering":
        X = np.concatenate([np.asarray(src, np.float32), np.asarray(tgt, np.float32)])
        langs = np.concatenate([as_language_array(src_lang, len(src)),
                                as_language_array(tgt_lang, len(tgt))])
        self.languages_ = sorted(set(langs.tolist()))
        self.means_ = np.stack([X[langs == lang].mean(axis=0) for lang in self.languages_])
        self.dim_ = int(X.shape[1])
        self._warned: set[str] = set()
        return self

    def _means_for(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        langs = as_language_array(languages, len(X))
        out = np.empty_like(X)  # (n, d)
        for lang in set(langs.tolist()):
            rows = langs == lang
            out[rows] = self._mean_of(lang, X[rows])
        return out

    def _mean_of(self, lang: str, rows: np.ndarray) -> np.ndarray:
        """``mu_lang (d,)``, or the fallback for each of ``rows (n, d)`` (row by row)."""
        if lang in self.languages_:
            return self.means_[self.languages_.index(lang)]
        if self.unknown_language == "error":
            raise ConfigError(f"mean-centering has no mean for language {lang!r}; it was fitted "
                              f"on {self.languages_}. Fit on data with that language, "
                              "calibrate it (disembed calibrate), or use "
                              "unknown_language='nearest' or 'global'")
        if lang not in getattr(self, "_warned", set()):
            logger.info("mean-centering: %r unseen in training, using the %s mean", lang,
                        self.unknown_language)
            self._warned = getattr(self, "_warned", set()) | {lang}
        if self.unknown_language == "global":
            return self.means_.mean(axis=0)
        # nearest training mean of each row (when no language identifier chose one)
        dist = ((rows[:, None, :] - self.means_[None]) ** 2).sum(axis=2)  # (n, L)
        return self.means_[dist.argmin(axis=1)]

    def _calibrate(self, X: np.ndarray, code: str) -> None:
        mean = X.mean(axis=0).astype(np.float32)
        if code in self.languages_:
            self.means_[self.languages_.index(code)] = mean
            return
        self.languages_ = [*self.languages_, code]
        self.means_ = np.vstack([self.means_, mean[None]])

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return X - self._means_for(X, languages)

    @resolving
    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return self._means_for(X, languages)

    def _state(self) -> dict[str, np.ndarray]:
        return {"means": self.means_.astype(np.float32)}

    def _extra_config(self) -> dict:
        return {"languages": self.languages_}

    def _set_state(self, state, extra) -> None:
        self.languages_ = list(extra["languages"])
        self.means_ = state["means"]
        if self.means_.shape != (len(self.languages_), self.dim_):
            raise CheckpointError(f"means have shape {self.means_.shape}, expected "
                                  f"({len(self.languages_)}, {self.dim_})")

    def meaning_map(self) -> MeaningMap:
        """``m = e - mu_lang``: one route per training language and the global mean's."""
        d = self._export_dim()
        routes, notes = centering_routes(self.languages_, self.means_, d)
        return MeaningMap(self.name, d, routes, True, notes)
