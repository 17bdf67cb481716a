"""``baseline``: the raw encoder embedding as the meaning part; no language part."""

from __future__ import annotations

import numpy as np

from .base import Disentangler, Languages, fitting, resolving
from .export_map import MeaningMap, single_route


class Baseline(Disentangler):
    """``m = e``. The reference row every method must beat."""

    method = "baseline"
    has_language = False
    needs_data = False
    uses_language = False

    def __init__(self) -> None:
        pass

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "Baseline":
        self.dim_ = int(np.asarray(src).shape[1])
        return self

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        return self._check(X).copy()

    def meaning_map(self) -> MeaningMap:
        return single_route(self.name, self._export_dim(), [])
