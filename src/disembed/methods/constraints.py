"""The library of named constraint terms every recipe is built from.

Each term is a pure function of a :class:`BatchViews` (tensors of one batch)
returning a scalar; a recipe is a mapping ``term name -> weight``. Notation
follows the papers: ``s``, ``t`` are the embeddings of a translation pair (B, d);
``s_M``, ``s_L`` their meaning and language parts; ``s'`` (written ``sn``) is
another sentence of the language of ``s`` (a same-language negative), likewise
``t'`` (``tn``). Cosines are row-wise; every term is a mean over the batch, and
terms with negatives average only over rows that have one (``neg_s``/``neg_t``).

Some terms need more than the two parts: the batch's language ids (``s_lang``,
``t_lang``), a language classifier's logits on ``s_L``/``t_L`` (``s_lid``, ``t_lid``,
DREAM) or a discriminator's logits on ``s_M``/``t_M`` (``s_adv``, ``t_adv``, MEAT).
Those views are optional: a term declares the ones it reads in the table :data:`TERMS`
at the end of this module, the recipe derives what to compute from its terms
(:func:`needs_of`), and a term that meets a missing view raises ``ConfigError``. (Terms
are plain functions listed in that table rather than decorated where they are defined: a
decorated function is invisible to the mutation tests, ``benchmarks/mutation_testing.py``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

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
    s_lang: torch.Tensor | None = None  # (B,) int64 language ids
    t_lang: torch.Tensor | None = None
    s_lid: torch.Tensor | None = None  # (B, K) language-ID logits of s_L (DREAM)
    t_lid: torch.Tensor | None = None
    s_adv: torch.Tensor | None = None  # (B, K) discriminator logits of s_M (MEAT)
    t_adv: torch.Tensor | None = None

    def __post_init__(self) -> None:
        self._units: dict[str, torch.Tensor] = {}
        self._sums: dict[str, torch.Tensor] = {}
        self._inv_norms: dict[str, torch.Tensor] = {}

    def _gathered(self, name: str) -> tuple[str, torch.Tensor] | None:
        """``(base view, indices)`` when view ``name`` is a negative gathered from the batch."""
        if "+" not in name and name.startswith(("sn", "tn")):
            index = getattr(self, f"{name[0]}_neg")
            if index is not None:
                return name[0] + name[2:], index  # sn_M -> s_M
        return None

    def view(self, name: str) -> torch.Tensor:
        """View ``name`` (B, d); ``"a+b"`` is the row-wise sum of views ``a`` and ``b``."""
        if "+" not in name:
            return getattr(self, name)
        if name not in self._sums:
            a, b = name.split("+")
            self._sums[name] = getattr(self, a) + getattr(self, b)
        return self._sums[name]

    def unit(self, name: str) -> torch.Tensor:
        """Row-normalised view ``name`` (computed once per batch). Only the pairwise terms
        ask for unit vectors, of whole in-batch views (``s_L``, ``t_L``), never of a
        gathered negative, so no gathering shortcut here."""
        if name not in self._units:
            self._units[name] = unit(self.view(name))
        return self._units[name]

    def inv_norm(self, name: str) -> torch.Tensor:
        """``1 / max(||x||, eps)`` of each row of view ``name``, (B,) (once per batch)."""
        if name not in self._inv_norms:
            gathered = self._gathered(name)
            if gathered is not None:
                self._inv_norms[name] = pick(self.inv_norm(gathered[0]), gathered[1])
            else:
                self._inv_norms[name] = _InverseNorm.apply(self.view(name))
        return self._inv_norms[name]

    def cos(self, a: str, b: str) -> torch.Tensor:
        """Row-wise cosine of two named views (or ``"a+b"`` sums), (B,).

        ``(a . b) / (max(|a|, eps) max(|b|, eps))``, as :func:`cos`; the dot product and the
        cached inverse norms avoid materialising unit vectors (fewer (B, d) passes, forward
        and backward)."""
        dot = (self.view(a) * self.view(b)).sum(-1)
        return dot * self.inv_norm(a) * self.inv_norm(b)

    def need(self, *names: str) -> list[torch.Tensor]:
        """Optional views ``names``; a clear error when the recipe did not provide one."""
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ConfigError(f"this constraint term needs the batch views {missing}, which this "
                              "recipe's head does not produce (language ids, a language "
                              "classifier or a discriminator); use a recipe that has them")
        return [getattr(self, n) for n in names]


class _InverseNorm(torch.autograd.Function):
    """``1 / max(||x_i||, eps)`` per row of ``x (B, d)`` -> (B,), with a one-pass backward
    (autograd's own for ``vector_norm`` makes three (B, d) passes)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        norm = torch.linalg.vector_norm(x, dim=-1)
        inv = norm.clamp_min(EPS).reciprocal()
        ctx.save_for_backward(x, inv, norm > EPS)
        return inv

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        x, inv, live = ctx.saved_tensors
        # d(1/|x|)/dx = -x / |x|^3 where the norm is above eps; 0 where eps holds it
        return x * (-grad * inv * inv * inv * live)[:, None]


def pick(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` of ``x``; ``index_select``'s backward is far cheaper than ``x[index]``'s."""
    return x.index_select(0, index)


#: norms below this count as this (no division by zero for an all-zero row)
EPS = 1e-8


def unit(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Rows of ``x (B, d)`` scaled to unit length."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True).clamp_min(eps * eps))


def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity, (B, d) x (B, d) -> (B,)."""
    return (unit(a) * unit(b)).sum(-1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x (B,)`` over rows where ``mask`` is 1; 0 when no row is."""
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


TermFn = Callable[[BatchViews], torch.Tensor]


@dataclass(frozen=True)
class Term:
    """A named constraint: ``fn(views) -> scalar`` and the optional views it reads
    (``"lang"``: language ids, ``"lid"``: a language classifier on the language parts,
    ``"adv"``: a discriminator on the meaning parts)."""

    name: str
    fn: TermFn
    needs: frozenset[str] = frozenset()


def term_table(*entries: TermFn | tuple[TermFn, Iterable[str]]) -> dict[str, Term]:
    """``{name: Term}`` from functions (named after themselves), or ``(function, needs)``
    for a term that reads optional views; a name given twice is an error."""
    table: dict[str, Term] = {}
    for entry in entries:
        fn, needs = entry if isinstance(entry, tuple) else (entry, ())
        if fn.__name__ in table:
            raise ConfigError(f"constraint term {fn.__name__!r} is defined twice")
        table[fn.__name__] = Term(fn.__name__, fn, frozenset(needs))
    return table


def needs_of(weights: Iterable[str]) -> set[str]:
    """The optional views the terms ``weights`` (names) read, together."""
    return {need for name in weights for need in TERMS[name].needs}


def translation_meaning_pull(v: BatchViews) -> torch.Tensor:
    """``1 - cos(s_M, t_M)``: meanings of a translation pair agree."""
    return (1 - v.cos("s_M", "t_M")).mean()


def negative_meaning_push(v: BatchViews) -> torch.Tensor:
    """``max(0, cos(s_M, s'_M)) + max(0, cos(t_M, t'_M))``: other sentences, other meanings."""
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
    return (masked_mean(1 - v.cos("s", "s_M+sn_L"), v.neg_s)
            + masked_mean(1 - v.cos("t", "t_M+tn_L"), v.neg_t))


def cross_reconstruction_translation(v: BatchViews) -> torch.Tensor:
    """``2 - cos(s, t_M + s_L) - cos(t, s_M + t_L)``: the translation's M rebuilds e."""
    return (1 - v.cos("s", "t_M+s_L")).mean() + (1 - v.cos("t", "s_M+t_L")).mean()


def reconstruction_mse(v: BatchViews) -> torch.Tensor:
    """``mse(s_M + s_L, s) + mse(t_M + t_L, t)`` (mean over rows and dimensions; DREAM's L_R)."""
    return (F.mse_loss(v.s_M + v.s_L, v.s) + F.mse_loss(v.t_M + v.t_L, v.t))


def reconstruction_cos(v: BatchViews) -> torch.Tensor:
    """``2 - cos(s, s_M + s_L) - cos(t, t_M + t_L)`` (MEAT's reconstruction)."""
    return (1 - v.cos("s", "s_M+s_L")).mean() + (1 - v.cos("t", "t_M+t_L")).mean()


def language_push_translation(v: BatchViews) -> torch.Tensor:
    """``max(0, cos(s_L, t_L))``: the two languages of a pair get different language parts."""
    return F.relu(v.cos("s_L", "t_L")).mean()


def orthogonality_abs(v: BatchViews) -> torch.Tensor:
    """``|cos(s_M, s_L)| + |cos(t_M, t_L)|`` (ORACLE's official ``oracle_old`` variant)."""
    return v.cos("s_M", "s_L").abs().mean() + v.cos("t_M", "t_L").abs().mean()


def language_identification(v: BatchViews) -> torch.Tensor:
    """``CE(lid(s_L), lang(s)) + CE(lid(t_L), lang(t))``: the language part names its language."""
    s_lid, t_lid, s_lang, t_lang = v.need("s_lid", "t_lid", "s_lang", "t_lang")
    return F.cross_entropy(s_lid, s_lang) + F.cross_entropy(t_lid, t_lang)


def adversarial_uniform(v: BatchViews) -> torch.Tensor:
    """``CE(D(s_M), uniform) + CE(D(t_M), uniform)``: the discriminator ``D`` cannot tell the
    language from the meaning part (MEAT's generator side; ``D`` is trained apart)."""
    s_adv, t_adv = v.need("s_adv", "t_adv")
    return (-F.log_softmax(s_adv, -1).mean(-1)).mean() + (-F.log_softmax(t_adv, -1).mean(-1)).mean()


def _pairwise_cos(x_unit: torch.Tensor) -> torch.Tensor:
    return x_unit @ x_unit.T  # (B, B)


def _same_language_mean(c: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
    """Mean of ``1 - c[i, j]`` over pairs ``i != j`` of one language; 0 when there are none."""
    mask = (lang[:, None] == lang[None, :]).float()
    mask.fill_diagonal_(0.0)
    return ((1 - c) * mask).sum() / mask.sum().clamp_min(1.0)


def language_cluster(v: BatchViews) -> torch.Tensor:
    """ORACLE's L_IC, per language: ``mean_{i!=j, lang(s_i)=lang(s_j)} (1 - cos(s_L^i, s_L^j))``
    plus the same over ``t``: every pair of same-language rows in the batch, masked."""
    s_lang, t_lang = v.need("s_lang", "t_lang")
    return (_same_language_mean(_pairwise_cos(v.unit("s_L")), s_lang)
            + _same_language_mean(_pairwise_cos(v.unit("t_L")), t_lang))


def language_cluster_batch(v: BatchViews) -> torch.Tensor:
    """ORACLE's official L_IC: ``mean_{i,j} (2 - cos(s_L^i, s_L^j) - cos(t_L^i, t_L^j))`` over
    all ``B x B`` pairs (diagonal included), whatever their languages."""
    return (2 - _pairwise_cos(v.unit("s_L")) - _pairwise_cos(v.unit("t_L"))).mean()


#: Every constraint term, by name, with the optional views it reads.
TERMS: dict[str, Term] = term_table(
    translation_meaning_pull, negative_meaning_push, language_pull, orthogonality,
    cross_reconstruction_language, cross_reconstruction_translation, reconstruction_mse,
    reconstruction_cos, language_push_translation, orthogonality_abs,
    (language_identification, ("lid", "lang")), (adversarial_uniform, ("adv",)),
    (language_cluster, ("lang",)), language_cluster_batch,
)


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    unknown = [name for name in weights if name not in TERMS]
    if unknown:
        raise ConfigError(f"unknown constraint term(s) {unknown}; known terms: {sorted(TERMS)}")
    if not weights:
        raise ConfigError("a recipe needs at least one constraint term with a weight")
    return {name: float(w) for name, w in weights.items()}


def add_weights(*presets: Mapping[str, float]) -> dict[str, float]:
    """Several presets as one: weights of a term present in more than one are summed."""
    out: dict[str, float] = {}
    for preset in presets:
        for name, w in preset.items():
            out[name] = out.get(name, 0.0) + float(w)
    return out


def weighted_loss(v: BatchViews, weights: Mapping[str, float]
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``sum_k weight_k * term_k(v)`` and the unweighted value of each term."""
    values = {name: TERMS[name].fn(v) for name in weights}
    total = sum(weights[name] * value for name, value in values.items())
    return total, values
