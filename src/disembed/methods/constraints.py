"""The library of named constraint terms every recipe is built from.

Each term is a pure function of a :class:`BatchViews` (tensors of one batch)
returning a scalar; a recipe is a mapping ``term name -> weight``. Notation
follows the papers: ``s``, ``t`` are the embeddings of a translation pair (B, d);
``s_M``, ``s_L`` their meaning and language parts; ``s'`` (written ``sn``) is
another sentence of the language of ``s`` (a same-language negative), likewise
``t'`` (``tn``). Cosines are row-wise; every term is a mean over the batch, and
terms with negatives average only over rows that have one (``neg_s``/``neg_t``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.nn.functional as F

from ..exceptions import ConfigError


@dataclass
class BatchViews:
    """Embeddings and their parts for one batch; all tensors (B, d), masks (B,) float."""

    s: torch.Tensor
    t: torch.Tensor
    s_M: torch.Tensor
    s_L: torch.Tensor
    t_M: torch.Tensor
    t_L: torch.Tensor
    sn: torch.Tensor
    sn_M: torch.Tensor
    sn_L: torch.Tensor
    tn: torch.Tensor
    tn_M: torch.Tensor
    tn_L: torch.Tensor
    neg_s: torch.Tensor
    neg_t: torch.Tensor
    s_neg: torch.Tensor | None = None  # (B,) indices of sn in the batch, when gathered
    t_neg: torch.Tensor | None = None

    def __post_init__(self) -> None:
        self._units: dict[str, torch.Tensor] = {}

    def unit(self, name: str) -> torch.Tensor:
        """Row-normalised view ``name`` (computed once per batch; negatives are gathered)."""
        if name not in self._units:
            if name.startswith(("sn", "tn")) and getattr(self, f"{name[0]}_neg") is not None:
                base = name[0] + name[2:]  # sn_M -> s_M
                self._units[name] = pick(self.unit(base), getattr(self, f"{name[0]}_neg"))
            else:
                self._units[name] = unit(getattr(self, name))
        return self._units[name]

    def cos(self, a: str, b: str) -> torch.Tensor:
        """Row-wise cosine of two named views, (B,)."""
        return (self.unit(a) * self.unit(b)).sum(-1)


def pick(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` of ``x``. ``index_select``: its backward is far cheaper than ``x[index]``'s."""
    return x.index_select(0, index)


def unit(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Rows of ``x (B, d)`` scaled to unit length."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True).clamp_min(eps * eps))


def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity, (B, d) x (B, d) -> (B,)."""
    return (unit(a) * unit(b)).sum(-1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x (B,)`` over rows where ``mask`` is 1; 0 when no row is."""
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def translation_meaning_pull(v: BatchViews) -> torch.Tensor:
    """``1 - cos(s_M, t_M)``: meanings of a translation pair agree."""
    return (1 - v.cos("s_M", "t_M")).mean()


def negative_meaning_push(v: BatchViews) -> torch.Tensor:
    """``max(0, cos(s_M, s'_M)) + max(0, cos(t_M, t'_M))``: different sentences, different meanings."""
    return (masked_mean(F.relu(v.cos("s_M", "sn_M")), v.neg_s)
            + masked_mean(F.relu(v.cos("t_M", "tn_M")), v.neg_t))


def language_pull(v: BatchViews) -> torch.Tensor:
    """``(1 - cos(s_L, s'_L)) + (1 - cos(t_L, t'_L))``: one language, one language part."""
    return (masked_mean(1 - v.cos("s_L", "sn_L"), v.neg_s)
            + masked_mean(1 - v.cos("t_L", "tn_L"), v.neg_t))


def orthogonality(v: BatchViews) -> torch.Tensor:
    """``max(0, cos(s_M, s_L)) + max(0, cos(t_M, t_L))``: meaning and language separate."""
    return F.relu(v.cos("s_M", "s_L")).mean() + F.relu(v.cos("t_M", "t_L")).mean()


def cross_reconstruction_language(v: BatchViews) -> torch.Tensor:
    """``2 - cos(s, s_M + s'_L) - cos(t, t_M + t'_L)``: any same-language L rebuilds e."""
    return (masked_mean(1 - (v.unit("s") * unit(v.s_M + v.sn_L)).sum(-1), v.neg_s)
            + masked_mean(1 - (v.unit("t") * unit(v.t_M + v.tn_L)).sum(-1), v.neg_t))


def cross_reconstruction_translation(v: BatchViews) -> torch.Tensor:
    """``2 - cos(s, t_M + s_L) - cos(t, s_M + t_L)``: the translation's M rebuilds e."""
    return ((1 - (v.unit("s") * unit(v.t_M + v.s_L)).sum(-1)).mean()
            + (1 - (v.unit("t") * unit(v.s_M + v.t_L)).sum(-1)).mean())


TERMS: dict[str, Callable[[BatchViews], torch.Tensor]] = {
    "translation_meaning_pull": translation_meaning_pull,
    "negative_meaning_push": negative_meaning_push,
    "language_pull": language_pull,
    "orthogonality": orthogonality,
    "cross_reconstruction_language": cross_reconstruction_language,
    "cross_reconstruction_translation": cross_reconstruction_translation,
}


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    unknown = [name for name in weights if name not in TERMS]
    if unknown:
        raise ConfigError(f"unknown constraint term(s) {unknown}; known terms: {sorted(TERMS)}")
    if not weights:
        raise ConfigError("a recipe needs at least one constraint term with a weight")
    return {name: float(w) for name, w in weights.items()}


def weighted_loss(v: BatchViews, weights: Mapping[str, float]
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``sum_k weight_k * term_k(v)`` and the unweighted value of each term."""
    values = {name: TERMS[name](v) for name in weights}
    total = sum(weights[name] * value for name, value in values.items())
    return total, values
