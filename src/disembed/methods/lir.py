"""``lir``: Language Information Removal (Yang et al. 2021), one subspace per language.

Ziyi Yang, Yinfei Yang, Daniel Cer, Eric Darve. *A Simple and Effective Method To Eliminate
the Self Language Bias in Multilingual Representations.* EMNLP 2021, pp. 5825-5832
(arXiv:2109.04727).

For each language ``k``, stack its training sentence embeddings into ``M_k (n_k, d)`` and
take the singular value decomposition ``M_k = U_k S_k V_k^T``. The first ``r`` right singular
vectors ``C_k = V_k[:, :r] (d, r)`` span the language's identity subspace, and

    m = e - C_k C_k^T e,        l = C_k C_k^T e        (e = m + l; e in language k)

* **No centering.** The paper takes the SVD of the raw language matrix ("SVD instead of
  PCA"), so when a language's embeddings share a large offset its first direction is close
  to the direction of its mean. (We get the same ``V_k[:, :r]`` from the eigenvectors of
  ``M_k^T M_k``, in float64; see :func:`top_directions`.)
* **rank** ``r`` defaults to 1: the paper's retrieval results (LAReQA) peak at ``r = 1``
  (classification transfer on Amazon Reviews peaks at ``r > 1``), and the LSAR authors run
  LIR as ``lir+1`` in all their scripts. It must be below the dimension and at most the
  number of training sentences of every language.
* **Data.** The paper samples 10,000 monolingual Wiki-40B sentences per language; here the
  directions come from the training pairs, both sides (English, on one side of every pair,
  has the most sentences).

Without a tag the model's language identifier names the language (:mod:`.base`). For a
language not seen in training, ``unknown_language`` decides, row by row, as in
``mean-centering``: ``"global"`` (default) takes those of all training sentences pooled,
``"nearest"`` the directions of the training language the identifier finds closest,
``"error"`` raises; ``calibrate`` adds a language's directions from unlabeled sentences.

Official code: the LSAR authors' copy of LIR (github.com/zhxieml/LSAR,
``src/alignment/_lir.py`` and ``__init__.py``; its README says it builds on
github.com/ziyi-yang/LIR, which is not stored here) follows these equations: SVD of the raw
``M_k^T``, keep 20 left singular vectors, renormalise the columns (a no-op for singular
vectors) and remove the first ``r``. It has no fallback for an unseen language (a
``KeyError``).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import numpy as np

from ..exceptions import CheckpointError, ConfigError, DataError
from ..util.constraints import Interval
from .base import Disentangler, Languages, as_language_array, fitting, resolving
from .export_map import GLOBAL_ROUTE, MeaningMap, affine

logger = logging.getLogger(__name__)

UNKNOWN_LANGUAGE = ("nearest", "global", "error")


def check_rank(rank: Any, method: str, allow_none: bool = False) -> int | None:
    """``rank`` as given if it is an integer >= 1 (or ``None`` where allowed); else ConfigError."""
    if rank is None and allow_none:
        return None
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        extra = " or None" if allow_none else ""
        raise ConfigError(f"{method} rank must be an integer >= 1{extra}; got {rank!r}")
    return int(rank)


def check_rank_below_dim(rank: int, dim: int, method: str) -> None:
    if rank >= dim:
        raise ConfigError(f"{method} rank must be below the embedding dimension {dim}; got "
                          f"rank={rank}. Use a rank between 1 and {dim - 1}")


def stack_training_rows(src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
                        tgt_lang: Languages) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of the pairs as one ``(2n, d) float64`` matrix and its ``(2n,)`` languages."""
    src, tgt = np.asarray(src, np.float64), np.asarray(tgt, np.float64)
    if src.ndim != 2 or tgt.shape != src.shape:
        raise DataError(f"expected src and tgt of one shape (n, d); got {src.shape} and "
                        f"{tgt.shape}")
    langs = np.concatenate([as_language_array(src_lang, len(src)),
                            as_language_array(tgt_lang, len(tgt))])
    return np.concatenate([src, tgt]), langs


def top_directions(rows: np.ndarray, rank: int, what: str) -> np.ndarray:
    """First ``rank`` right singular vectors ``(d, rank) float32`` of ``rows (n, d)``, uncentred.

    Computed as the top eigenvectors of ``rows^T rows (d, d)`` in float64: the same vectors
    as the SVD's, several times faster when ``n >> d``, and accurate for the top directions,
    the only ones used.
    """
    if len(rows) < rank:
        raise DataError(f"lir rank {rank} needs at least {rank} sentences of {what}; got "
                        f"{len(rows)}. Lower rank or give more sentences")
    rows = np.asarray(rows, np.float64)
    lam, V = np.linalg.eigh(rows.T @ rows)  # ascending eigenvalues = squared singular values
    lam, V = lam[::-1], V[:, ::-1]
    tol = max(lam[0], 0.0) * len(lam) * np.finfo(np.float64).eps
    if lam[rank - 1] <= tol:
        supported = int((lam > tol).sum())
        raise DataError(f"the sentences of {what} span only {supported} dimensions; lir rank "
                        f"{rank} asks for more. Use rank <= {supported}")
    return np.ascontiguousarray(V[:, :rank], dtype=np.float32)


class Lir(Disentangler):
    """Per-language top-``rank`` singular directions projected out; see the module docstring."""

    method = "lir"
    paper = ("Yang, Yang, Cer, Darve. *A Simple and Effective Method To Eliminate the Self "
             "Language Bias in Multilingual Representations.* EMNLP 2021 (arXiv:2109.04727)")
    uses_language = True
    hpo_default = {"rank": [1, 2, 4, 8]}

    #: unknown_language is checked by __init__ (its message tells about removed policies)
    _parameter_constraints = {"rank": [Interval(int, 1, None)]}

    def __init__(self, rank: int = 1,
                 unknown_language: Literal["nearest", "global", "error"] = "global") -> None:
        if unknown_language not in UNKNOWN_LANGUAGE:
            raise ConfigError("unknown_language must be 'nearest', 'global' or 'error'; "
                              f"got {unknown_language!r}")
        self.rank = check_rank(rank, "lir")
        self.unknown_language = unknown_language

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "Lir":
        X, langs = stack_training_rows(src, tgt, src_lang, tgt_lang)
        check_rank_below_dim(self.rank, X.shape[1], "lir")
        self.languages_ = sorted(set(langs.tolist()))
        self.components_ = np.stack([  # (L, d, r)
            top_directions(X[langs == lang], self.rank, f"language {lang!r}")
            for lang in self.languages_])
        self.global_components_ = top_directions(X, self.rank, "all training languages")
        self.dim_ = int(X.shape[1])
        self._warned: set[str] = set()
        return self

    def _components_of(self, lang: str, rows: np.ndarray) -> np.ndarray:
        """``C (d, r)`` for ``lang``, or the ``unknown_language`` fallback for ``rows (n, d)``."""
        if lang in self.languages_:
            return self.components_[self.languages_.index(lang)]
        if self.unknown_language == "error":
            raise ConfigError(f"lir has no subspace for language {lang!r}; it was fitted on "
                              f"{self.languages_}. Fit on data with that language, "
                              "calibrate it, or use unknown_language='nearest' or 'global'")
        if lang not in getattr(self, "_warned", set()):
            logger.info("lir: %r unseen in training, using the %s directions", lang,
                        self.unknown_language)
            self._warned = getattr(self, "_warned", set()) | {lang}
        # "global", and "nearest" where no language identifier chose a language
        return self.global_components_

    def _calibrate(self, X: np.ndarray, code: str) -> None:
        C = top_directions(X, self.rank, f"calibration sentences of {code!r}")  # (d, r)
        if code in self.languages_:
            self.components_[self.languages_.index(code)] = C
            return
        self.languages_ = [*self.languages_, code]
        self.components_ = np.concatenate([self.components_, C[None]])

    @resolving
    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        langs = as_language_array(languages, len(X))
        out = np.empty_like(X)  # (n, d)
        for lang in sorted(set(langs.tolist())):
            rows = langs == lang
            C = self._components_of(lang, X[rows])  # (d, r)
            out[rows] = (X[rows] @ C) @ C.T
        return out

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return X - self.language(X, languages)

    def _state(self) -> dict[str, np.ndarray]:
        return {"components": self.components_, "global_components": self.global_components_}

    def _extra_config(self) -> dict[str, Any]:
        return {"languages": self.languages_}

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.languages_ = list(extra.get("languages", []))
        d, r = self.dim_, self.rank
        want = {"components": (len(self.languages_), d, r), "global_components": (d, r)}
        got = {k: tuple(v.shape) for k, v in state.items()}
        if got != want:
            raise CheckpointError(f"lir weights {got} do not fit rank {r}, dimension {d} and "
                                  f"languages {self.languages_} (expected {want})")
        self.components_ = state["components"]
        self.global_components_ = state["global_components"]

    def meaning_map(self) -> MeaningMap:
        """``m = (I - C_lang C_lang^T) e``: one route per training language, and the
        global directions' route (``unknown_language='global'``)."""
        d = self._export_dim()

        def erase(C: np.ndarray) -> list:
            C = C.astype(np.float64)  # (d, r)
            return [affine(np.eye(d) - C @ C.T)]

        routes = {lang: erase(C) for lang, C in zip(self.languages_, self.components_,
                                                     strict=True)}
        routes[GLOBAL_ROUTE] = erase(self.global_components_)
        notes = [f"route {GLOBAL_ROUTE!r} erases the directions of all training languages "
                 "(disembed's unknown_language='global', its default for a language it "
                 "never saw)"]
        return MeaningMap(self.name, d, routes, True, notes)
