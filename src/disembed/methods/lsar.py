"""``lsar``: the low-rank subspace of the language means projected out (Xie et al. 2022).

Zhihui Xie, Handong Zhao, Tong Yu, Shuai Li. *Discovering Low-rank Subspaces for
Language-agnostic Multilingual Representations.* EMNLP 2022, pp. 5617-5633
(aclanthology 2022.emnlp-main.379; on arXiv only in January 2024 as 2401.05792, hence the
"2024" some cite).

With ``mu_k (d,)`` the mean embedding of language ``k`` over its training sentences and
``M = [mu_1 ... mu_L] (d, L)``, the paper models ``M = mu 1^T + M_s Gamma^T``: a shared
vector ``mu`` plus a rank-``r`` language-specific subspace ``M_s (d, r)`` with coordinates
``Gamma (L, r)``, fitted by SVD of the means centred across languages:

    mu_bar = (1/L) M 1,      M - mu_bar 1^T = U S V^T,      M_s = U[:, :r]

and every embedding, of any language, is projected onto the subspace's null space:

    m = (I - M_s M_s^T) e,        l = M_s M_s^T e          (e = m + l)

No language id is needed at inference, so unseen languages are handled as any other.

* **rank** ``r`` defaults to ``None``, meaning ``L - 1``: the whole span of the centred means
  (all differences between language means), the setting of the authors' Tatoeba script
  (``lsar+36`` with 37 languages); their Amazon runs use ``r = 1..3``. ``r`` must be below
  ``L`` (the centred means have rank at most ``L - 1``) and below the dimension.
* **Data.** The paper averages monolingual OSCAR/Wikipedia sentences of 37 languages; here the
  means are over the training pairs, both sides, as in ``mean-centering``.

Official code (github.com/zhxieml/LSAR, ``src/alignment/_low_rank.py``): after the SVD it
re-centres: with the rank-``r`` fit ``M' = mu_bar 1^T + U_r S_r V_r^T`` it takes
``mu = (M'^+)^T 1 / |(M'^+)^T 1|^2`` and ``M_s`` = the top-``r`` left singular vectors of
``M' - mu 1^T``. That ``mu`` is the point of the affine hull ``mu_bar + span(U_r)`` nearest the
origin, so ``M' - mu 1^T`` has its columns in ``span(U_r)`` and the projector ``M_s M_s^T`` is
the same as ours (checked numerically in tests/methods/test_closed_form.py); only the basis
differs. (The paper's full text was not readable here; its abstract, the authors' code and
reviews agree on "SVD of the per-language mean embeddings, then project onto the null
space", and with or without the re-centring step the projector is the same.) The authors'
LAReQA scripts pass ``r = L`` (``lsar+7`` with MLQA-R's 7 languages, ``lsar+11`` with
XQuAD-R's 11), whose ``L``-th direction has singular value 0 and is arbitrary; we reject
``r >= L``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..exceptions import CheckpointError, ConfigError, DataError
from ..util.constraints import Interval
from .base import Disentangler, Languages, fitting, resolving
from .export_map import MeaningMap, affine, single_route
from .lir import check_rank, check_rank_below_dim, stack_training_rows

logger = logging.getLogger(__name__)


def language_mean_subspace(means: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """``(M_s (d, rank) float32, singular values (min(L, d),))`` of ``means (L, d)``."""
    centred = means - means.mean(axis=0)  # (L, d)
    _, s, vt = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
    tol = s[0] * max(centred.shape) * np.finfo(np.float64).eps
    if s[rank - 1] <= tol:
        supported = int((s > tol).sum())
        raise DataError(f"the centred language means span only {supported} dimensions; lsar "
                        f"rank {rank} asks for more. Use rank <= {supported}")
    return vt[:rank].T.astype(np.float32), s


class Lsar(Disentangler):
    """The language-mean subspace projected out of every embedding; see the module docstring."""

    method = "lsar"
    paper = ("Xie, Zhao, Yu, Li. *Discovering Low-rank Subspaces for Language-agnostic "
             "Multilingual Representations.* EMNLP 2022")
    uses_language = False
    hpo_default = {"rank": [1, 2, 4, 8, None]}

    _parameter_constraints = {"rank": [Interval(int, 1, None), None]}

    def __init__(self, rank: int | None = None) -> None:
        self.rank = check_rank(rank, "lsar", allow_none=True)

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "Lsar":
        X, langs = stack_training_rows(src, tgt, src_lang, tgt_lang)
        languages = sorted(set(langs.tolist()))
        if len(languages) < 2:
            raise DataError(f"lsar needs at least two training languages; got {languages}")
        rank = len(languages) - 1 if self.rank is None else self.rank
        if rank >= len(languages):
            raise ConfigError(f"lsar rank must be below the number of training languages "
                              f"({len(languages)}: {', '.join(languages)}); got rank={rank}. "
                              f"Use rank <= {len(languages) - 1} or rank=None (all)")
        check_rank_below_dim(rank, X.shape[1], "lsar")
        means = np.stack([X[langs == lang].mean(axis=0) for lang in languages])  # (L, d)
        self.components_, s = language_mean_subspace(means, rank)
        self.singular_values_ = [float(v) for v in s]
        self.languages_, self.rank_, self.dim_ = languages, rank, int(X.shape[1])
        logger.info("lsar: rank %d of %d languages; singular values of the centred means %s",
                    rank, len(languages), np.round(s, 4).tolist())
        return self

    @resolving
    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        """``M_s M_s^T e`` per row; ``languages`` is not needed (kept for the interface)."""
        X = self._check(X)
        return (X @ self.components_) @ self.components_.T

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        return X - (X @ self.components_) @ self.components_.T

    def _state(self) -> dict[str, np.ndarray]:
        return {"components": self.components_}

    def _extra_config(self) -> dict[str, Any]:
        return {"languages": self.languages_, "rank": self.rank_,
                "singular_values": self.singular_values_}

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.languages_ = list(extra.get("languages", []))
        self.rank_ = extra.get("rank")
        self.singular_values_ = list(extra.get("singular_values", []))
        want = (self.dim_, self.rank_)
        if (self.rank_ is None or (self.rank is not None and self.rank != self.rank_)
                or set(state) != {"components"} or state["components"].shape != want):
            raise CheckpointError(
                f"lsar weights {({k: v.shape for k, v in state.items()})} do not fit rank "
                f"{self.rank_} (params: {self.rank}) and dimension {self.dim_}; expected "
                f"{{'components': {want}}}")
        self.components_ = state["components"]

    def meaning_map(self) -> MeaningMap:
        """``m = (I - M M^T) e``: one linear layer."""
        d = self._export_dim()
        C = self.components_.astype(np.float64)  # (d, r)
        return single_route(self.name, d, [affine(np.eye(d) - C @ C.T)])
