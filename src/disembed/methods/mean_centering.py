"""``mean-centering``: subtract a per-language mean (Libovický et al. 2020; used as a
baseline by DREAM, MEAT and SEED).

    m = e - mu_lang,    l = mu_lang

``mu_lang`` is the mean embedding of language ``lang`` over the training pairs
(both sides contribute). The language must be known at inference. For a
language not seen in training, ``unknown_language`` decides: ``"error"`` raises,
``"batch"`` (default) uses the mean of the rows being transformed (transductive,
logged once per language), ``"global"`` uses the mean over all training languages.
"""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np

from ..exceptions import CheckpointError, ConfigError
from .base import Disentangler, Languages, as_language_array
from .export_map import MeaningMap, centering_routes

logger = logging.getLogger(__name__)


UNKNOWN_LANGUAGE_POLICIES = ("error", "batch", "global")


def check_unknown_language(policy: str) -> None:
    """Raise ``ConfigError`` unless ``policy`` is one of :data:`UNKNOWN_LANGUAGE_POLICIES`."""
    if policy not in UNKNOWN_LANGUAGE_POLICIES:
        raise ConfigError("unknown_language must be 'error', 'batch' or 'global'; "
                          f"got {policy!r}")


class MeanCentering(Disentangler):
    method = "mean-centering"
    uses_language = True

    def __init__(self, unknown_language: Literal["error", "batch", "global"] = "batch") -> None:
        check_unknown_language(unknown_language)
        self.unknown_language = unknown_language

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
        if lang in self.languages_:
            return self.means_[self.languages_.index(lang)]
        if self.unknown_language == "error":
            raise ConfigError(f"mean-centering has no mean for language {lang!r}; it was fitted "
                              f"on {self.languages_}. Fit on data with that language or use "
                              "unknown_language='batch'")
        if lang not in getattr(self, "_warned", set()):
            logger.info("mean-centering: %r unseen in training, using the %s mean", lang,
                        self.unknown_language)
            self._warned = getattr(self, "_warned", set()) | {lang}
        return rows.mean(axis=0) if self.unknown_language == "batch" else self.means_.mean(axis=0)

    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return X - self._means_for(X, languages)

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
