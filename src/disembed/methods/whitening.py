"""``whitening``: per-language centring, then whitening of the centred rows (shared or per
language), one of issue 37's candidates against plain mean-centering.

    m = T_lang (e - mu_lang),    l = e - m

``mu_lang`` as :class:`.MeanCentering`. ``T`` raises a covariance of the centred training
rows (both sides of every pair), shrunk towards its mean eigenvalue by ``shrinkage``
(``C_s = (1 - shrinkage) C + shrinkage tr(C)/d I``), to the power ``-power/2``: ``power = 1``
whitens fully (Su et al. 2021 whiten sentence embeddings for STS), ``power < 1`` part way.
``per_language=False``: one ``T`` from the pooled within-language covariance; ``True``:
each language whitened by its own covariance ("per-language whitening"), and a language
not seen in training by the pooled one. Without a tag the language identifier names the
language (:mod:`.base`); unseen languages follow ``unknown_language`` as in mean-centering.

Measured in docs/seed_basins.md: on e5-small every setting tried loses to plain
mean-centering on STS17 and WMT20 QE.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from ..exceptions import CheckpointError, ConfigError
from ..util.constraints import Boolean, Interval, Options
from .base import Languages, as_language_array, fitting, resolving
from .export_map import GLOBAL_ROUTE, MeaningMap, affine, centering_routes
from .mean_centering import UNKNOWN_LANGUAGE_POLICIES, MeanCentering

#: key of the map for rows without a language of their own (unseen languages)
POOLED = "*"


def shrunk_power(C: np.ndarray, power: float, shrinkage: float) -> np.ndarray:
    """``C_s ** power`` of a symmetric positive semi-definite ``C (d, d)``, float64, with
    ``C_s`` shrunk towards its mean eigenvalue; eigenvalues floored at 1e-9 of the largest."""
    d = len(C)
    C = (1 - shrinkage) * C + shrinkage * np.trace(C) / d * np.eye(d)
    lam, V = np.linalg.eigh((C + C.T) / 2)
    lam = np.maximum(lam, max(float(lam.max()), 1e-300) * 1e-9)
    return (V * lam**power) @ V.T


class CentredLinear(MeanCentering):
    """Base of recipes ``m = T_lang (e - mu_lang)``: centring, then one linear map per
    language (``maps_[lang] (d, d)``, ``maps_[POOLED]`` for the rest). A subclass fits the
    maps (:meth:`_fit_maps`) from the centred rows ``C (n, d) float64`` and their languages."""

    _parameter_constraints: ClassVar[dict] = {
        "unknown_language": [Options(*UNKNOWN_LANGUAGE_POLICIES)]}

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "CentredLinear":
        super().fit(src, tgt, src_lang, tgt_lang)
        X = np.concatenate([np.asarray(src, np.float32), np.asarray(tgt, np.float32)])
        langs = np.concatenate([as_language_array(src_lang, len(src)),
                                as_language_array(tgt_lang, len(tgt))])
        centred = (X - self._means_for(X, langs)).astype(np.float64)
        self.maps_ = {k: v.astype(np.float32) for k, v in self._fit_maps(centred, langs).items()}
        return self

    def _fit_maps(self, centred: np.ndarray, langs: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _map_of(self, lang: str) -> np.ndarray:
        return self.maps_.get(lang, self.maps_[POOLED])

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        centred = X - self._means_for(X, languages)
        langs = as_language_array(languages, len(X))
        out = np.empty_like(centred)
        for lang in set(langs.tolist()):
            rows = langs == lang
            out[rows] = centred[rows] @ self._map_of(lang).T
        return out

    @resolving
    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return X - self.meaning(X, languages)

    def _calibrate(self, X: np.ndarray, code: str) -> None:
        super()._calibrate(X, code)
        if code in self.maps_:
            del self.maps_[code]  # a calibrated language takes the pooled map

    def _state(self) -> dict[str, np.ndarray]:
        keys = sorted(self.maps_)
        return {**super()._state(), "maps": np.stack([self.maps_[k] for k in keys])}

    def _extra_config(self) -> dict[str, Any]:
        return {**super()._extra_config(), "map_languages": sorted(self.maps_)}

    def _set_state(self, state, extra) -> None:
        super()._set_state({"means": state["means"]}, extra)
        keys, maps = list(extra.get("map_languages", [])), state.get("maps")
        if maps is None or maps.shape != (len(keys), self.dim_, self.dim_) or POOLED not in keys:
            raise CheckpointError(f"{self.method}: maps of shape "
                                  f"{None if maps is None else maps.shape} do not fit "
                                  f"{keys} and dimension {self.dim_}")
        self.maps_ = dict(zip(keys, maps, strict=True))

    def meaning_map(self) -> MeaningMap:
        """``m = T_lang (e - mu_lang)``: per route, the centring then the language's map."""
        d = self._export_dim()
        routes, notes = centering_routes(self.languages_, self.means_, d)
        for lang, layers in routes.items():
            key = POOLED if lang == GLOBAL_ROUTE else lang
            routes[lang] = [*layers, affine(self._map_of(key))]
        return MeaningMap(self.name, d, routes, True, notes)


class Whitening(CentredLinear):
    """Per-language centring then whitening; see the module docstring."""

    method = "whitening"
    paper = ("Su, Cao, Liu, Ou. *Whitening Sentence Representations for Better Semantics and "
             "Faster Retrieval.* arXiv:2103.15316 (2021), after per-language centring")
    hpo_default = {"power": [0.25, 1.0], "shrinkage": [0.1, 0.5],
                   "per_language": [False, True]}
    _parameter_constraints: ClassVar[dict] = {
        **CentredLinear._parameter_constraints,
        "power": [Interval(float, 0, 1, closed="right")],
        "shrinkage": [Interval(float, 0, 1, closed="left")],
        "per_language": [Boolean()]}

    def __init__(self, power: float = 1.0, shrinkage: float = 0.1, per_language: bool = False,
                 unknown_language: Literal["nearest", "global", "error"] = "global") -> None:
        super().__init__(unknown_language)
        if not 0 < power <= 1 or not 0 <= shrinkage < 1:
            raise ConfigError(f"whitening needs 0 < power <= 1 and 0 <= shrinkage < 1; got "
                              f"power={power!r}, shrinkage={shrinkage!r}")
        self.power, self.shrinkage, self.per_language = power, shrinkage, per_language

    def _fit_maps(self, centred: np.ndarray, langs: np.ndarray) -> dict[str, np.ndarray]:
        def whiten(rows):
            return shrunk_power(rows.T @ rows / len(rows), -self.power / 2, self.shrinkage)

        maps = {POOLED: whiten(centred)}
        if self.per_language:
            maps.update({lang: whiten(centred[langs == lang]) for lang in self.languages_})
        return maps
