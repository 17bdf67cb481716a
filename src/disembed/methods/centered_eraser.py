"""``centered-eraser``: per-language centring, then a LEACE eraser (Belrose et al. 2023) of
what still tells the languages apart, one of issue 37's candidates against plain
mean-centering.

    c = e - mu_lang,    m = (I - L R) c,    l = e - m

Centring makes the language means of the training rows equal, so LEACE fitted on the
centred rows themselves would erase nothing (its cross-covariance with the language is 0).
What centring leaves is in the *directions* of the rows: the eraser's ``L R`` (:func:`.leace.
leace_factors`, rank at most ``L - 1``) is fitted on the unit-length centred rows
``c / |c|``, where each language still has its own mean direction, and applied to ``c``.
Without a tag the language identifier names the language; unseen languages follow
``unknown_language`` as in mean-centering. ``rank`` caps the erased directions (``None``:
all ``L - 1``).

Measured in docs/seed_basins.md: on e5-small it loses to plain mean-centering on STS17 and
WMT20 QE.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from ..exceptions import DataError
from ..util.constraints import Interval
from .leace import leace_factors
from .whitening import POOLED, CentredLinear


class CenteredEraser(CentredLinear):
    """Centring then a LEACE eraser fitted on the unit-length centred rows."""

    method = "centered-eraser"
    paper = ("Belrose et al. *LEACE: Perfect linear concept erasure in closed form.* NeurIPS "
             "2023 (arXiv:2306.03819), after per-language centring")
    hpo_default = {"rank": [None, 1, 4]}
    _parameter_constraints: ClassVar[dict] = {**CentredLinear._parameter_constraints,
                                              "rank": [Interval(int, 1, None), None]}

    def __init__(self, rank: int | None = None,
                 unknown_language: Literal["nearest", "global", "error"] = "global") -> None:
        super().__init__(unknown_language)
        self.rank = rank

    def _fit_maps(self, centred: np.ndarray, langs: np.ndarray) -> dict[str, np.ndarray]:
        if len(self.languages_) < 2:
            raise DataError("centered-eraser needs at least two training languages; got "
                            f"{self.languages_}")
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        U = centred / np.maximum(norms, 1e-12)  # (n, d) unit directions
        Z = (langs[:, None] == np.array(self.languages_, dtype=object)[None]).astype(float)
        Uc, Zc = U - U.mean(axis=0), Z - Z.mean(axis=0)
        cap = len(self.languages_) - 1 if self.rank is None else min(self.rank,
                                                                      len(self.languages_) - 1)
        left, right = leace_factors(Uc.T @ Uc / len(U), Uc.T @ Zc / len(U), max_rank=cap)
        return {POOLED: np.eye(centred.shape[1]) - left @ right}
