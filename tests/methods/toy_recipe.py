"""The worked example of CONTRIBUTING.md: a new recipe in one file.

``shift`` subtracts the mean over all training rows (both sides, every language) and
scales by ``alpha``: ``m = alpha (e - mu)``. It ignores the language, says so, has one
hyperparameter to tune and exports as one affine layer.
"""

from __future__ import annotations

import numpy as np

from disembed.methods import Disentangler
from disembed.methods.export_map import MeaningMap, affine, single_route


class Shift(Disentangler):
    """``m = alpha (e - mu)``, ``mu`` the mean training embedding."""

    method = "shift"
    has_language = False  # no language part
    uses_language = False  # meaning does not depend on the language of a row
    hpo_default = {"alpha": [1.0, 0.5]}  # what `disembed tune` tries

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def fit(self, src, tgt, src_lang, tgt_lang) -> "Shift":
        X = np.concatenate([src, tgt]).astype(np.float32)  # (2n, d)
        self.mean_ = X.mean(axis=0)
        self.dim_ = int(X.shape[1])
        return self

    def meaning(self, X, languages=None) -> np.ndarray:
        return self.alpha * (self._check(X) - self.mean_)

    def meaning_map(self) -> MeaningMap:  # m = (alpha I) e - alpha mu
        d = self._export_dim()
        return single_route(self.name, d, [affine(self.alpha * np.eye(d),
                                                  -self.alpha * self.mean_)])

    def _state(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean_}

    def _set_state(self, state, extra) -> None:
        self.mean_ = state["mean"]
