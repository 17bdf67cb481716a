"""``leace``: least-squares erasure of the language concept (Belrose et al. 2023).

Nora Belrose, David Schneider-Joseph, Shauli Ravfogel, Ryan Cotterell, Edward Raff, Stella
Biderman. *LEACE: Perfect linear concept erasure in closed form.* NeurIPS 2023
(arXiv:2306.03819).

The concept ``Z`` is the language: ``z (L,)`` one-hot over the ``L`` training languages, for
every training sentence, both sides of each pair (``X (n, d)``, ``Z (n, L)``). With the
means ``mu = E[X]``, the covariance ``S_XX`` and the cross-covariance ``S_XZ (d, L)``, LEACE
is the affine map that makes ``Cov(r(X), Z) = 0`` (no linear classifier beats a constant
one at predicting ``Z``) while moving ``X`` least in the mean squared norm:

    r(x) = x - W^+ P W (x - mu),        W = (S_XX^{1/2})^+,
    P = orthogonal projection onto colspace(W S_XZ)

    m = r(e),        l = e - r(e) = W^+ P W (e - mu)

``W`` whitens; ``W^+ = S_XX^{1/2}`` on the support of ``X``. A rank-deficient ``S_XX`` (fewer
sentences than dimensions, or embeddings in a subspace) is handled through its eigenvalues:
``S_XX = V diag(lambda) V^T``, eigenvalues at most ``lambda_max * d * eps`` (float64) count
as zero, ``W = V diag(lambda^{-1/2}) V^T`` over the rest. ``W S_XZ`` has rank at most ``L - 1``
(the centred one-hot columns sum to zero); its left singular vectors ``U (d, q)`` above
``s_max * max(d, L) * eps`` give ``P = U U^T``. The eraser is stored as the factors
``proj_left = W^+ U (d, q)`` and ``proj_right = U^T W (q, d)``, with ``q <= L - 1``. It needs
no language id at inference.

Official code (github.com/EleutherAI/concept-erasure, ``concept_erasure/leace.py``,
``LeaceFitter``) differs from the paper by default in three places, none followed here:
``shrinkage=True`` estimates ``S_XX`` with optimal linear (random-matrix) shrinkage instead of
the sample covariance; ``svd_tol=0.01`` drops singular values of ``W S_XZ`` below an absolute
0.01 (its docstring notes this may leave trace correlations); ``constrain_cov_trace=True`` mixes
``P`` with the orthogonal projection ``I - U U^T`` whenever erasure would increase the trace of
the covariance, so the map is then no longer the LEACE solution. Its eigenvalue cut-off is
ours (``lambda_max * d * eps`` of its dtype), and its Bessel-corrected ``1/(n-1)`` scaling
changes nothing (``P`` and ``W^+ P W`` are invariant to the scale of both covariances).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exceptions import CheckpointError, DataError
from .base import Disentangler, Languages, fitting, resolving
from .export_map import MeaningMap, affine, single_route
from .lir import stack_training_rows

EPS = np.finfo(np.float64).eps


def leace_factors(sigma_xx: np.ndarray, sigma_xz: np.ndarray, max_rank: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(W^+ U (d, q), U^T W (q, d))`` for ``sigma_xx (d, d)``, ``sigma_xz (d, k)``, in float64.

    ``W^+ P W = left @ right``: ``W`` the pseudo-inverse square root of ``sigma_xx`` and
    ``P = U U^T`` the projection onto the column space of ``W sigma_xz``, of rank at most
    ``max_rank`` (``k - 1`` for a centred one-hot concept: whitening near-zero-variance
    directions amplifies rounding noise in the zero singular value above any tolerance).
    """
    lam, V = np.linalg.eigh((sigma_xx + sigma_xx.T) / 2)
    keep = lam > max(lam.max(), 0.0) * len(lam) * EPS
    V, root = V[:, keep], np.sqrt(lam[keep])
    W = (V / root) @ V.T  # (d, d) = (S_XX^{1/2})^+
    W_pinv = (V * root) @ V.T  # (d, d) = S_XX^{1/2} on the support
    whitened = W @ sigma_xz  # (d, k)
    U, s, _ = np.linalg.svd(whitened, full_matrices=False)
    U = U[:, s > (s.max() if s.size else 0.0) * max(whitened.shape) * EPS]  # (d, q)
    U = U[:, :max_rank] if max_rank is not None else U
    return W_pinv @ U, U.T @ W


class Leace(Disentangler):
    """LEACE eraser of the language concept; see the module docstring."""

    method = "leace"
    paper = ("Belrose et al. *LEACE: Perfect linear concept erasure in closed form.* NeurIPS 2023 "
             "(arXiv:2306.03819)")
    uses_language = False

    def __init__(self) -> None:
        pass

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "Leace":
        X, langs = stack_training_rows(src, tgt, src_lang, tgt_lang)
        self.languages_ = sorted(set(langs.tolist()))
        if len(self.languages_) < 2:
            raise DataError("leace needs at least two training languages to erase the "
                            f"language; got {self.languages_}")
        Z = (langs[:, None] == np.array(self.languages_, dtype=object)[None, :]).astype(
            np.float64)  # (n, L) one-hot
        mean = X.mean(axis=0)
        Xc, Zc = X - mean, Z - Z.mean(axis=0)
        left, right = leace_factors(Xc.T @ Xc / len(X), Xc.T @ Zc / len(X),
                                    max_rank=len(self.languages_) - 1)
        self.mean_ = mean.astype(np.float32)
        self.proj_left_, self.proj_right_ = left.astype(np.float32), right.astype(np.float32)
        self.dim_ = int(X.shape[1])
        return self

    @resolving
    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        """The erased part ``W^+ P W (e - mu)``; ``languages`` is not needed."""
        X = self._check(X)
        return ((X - self.mean_) @ self.proj_right_.T) @ self.proj_left_.T

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return X - ((X - self.mean_) @ self.proj_right_.T) @ self.proj_left_.T

    def _state(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean_, "proj_left": self.proj_left_,
                "proj_right": self.proj_right_}

    def _extra_config(self) -> dict[str, Any]:
        return {"languages": self.languages_}

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.languages_ = list(extra.get("languages", []))
        d = self.dim_
        shapes = {k: tuple(v.shape) for k, v in state.items()}
        q = shapes.get("proj_left", (d, -1))[-1]
        want = {"mean": (d,), "proj_left": (d, q), "proj_right": (q, d)}
        if shapes != want or not 0 <= q < max(len(self.languages_), 1):
            raise CheckpointError(f"leace weights {shapes} do not fit dimension {d} and "
                                  f"{len(self.languages_)} languages (expected {want}, with "
                                  f"q < {len(self.languages_)})")
        self.mean_ = state["mean"]
        self.proj_left_, self.proj_right_ = state["proj_left"], state["proj_right"]

    def meaning_map(self) -> MeaningMap:
        """``m = e - L R (e - mu) = (I - L R) e + L R mu``: one affine layer."""
        d = self._export_dim()
        P = self.proj_left_.astype(np.float64) @ self.proj_right_.astype(np.float64)  # (d, d)
        return single_route(self.name, d, [affine(np.eye(d) - P, P @ self.mean_)])
