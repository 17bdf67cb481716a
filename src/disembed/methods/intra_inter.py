"""``intra``, ``inter``, ``both``: the constraint ablation of Nonomura et al. (2026) on SEED's head.

The head is SEED's (``m = W e + b``, ``l = e - m``). With ``x``, ``y`` a translation pair
and ``x'``, ``y'`` other sentences in the languages of ``x``, ``y``:

    intra = L_mean + L_lang                     (constraints within meaning, within language)
        L_mean = 2 (1 - cos(x^(m), y^(m))) + max(0, cos(x^(m), x'^(m))) + max(0, cos(y^(m), y'^(m)))
        L_lang = (1 - cos(x^(l), x'^(l))) + (1 - cos(y^(l), y'^(l)))
    inter = L_cross + L_sep                     (constraints between meaning and language)
        L_cross = 4 - cos(e_x, e_y^(m) + e_x^(l)) - cos(e_y, e_x^(m) + e_y^(l))
                    - cos(e_x, e_x^(m) + e_x'^(l)) - cos(e_y, e_y^(m) + e_y'^(l))
        L_sep   = max(0, cos(x^(m), x^(l))) + max(0, cos(y^(m), y^(l)))
    both  = intra + inter = SEED's loss

In the constraint library: intra = ``2 * translation_meaning_pull + negative_meaning_push
+ language_pull``; inter = ``cross_reconstruction_translation +
cross_reconstruction_language + orthogonality``; ``both`` has exactly SEED's weights
(it is registered under its own name so an ablation table reads intra / inter / both).

Differences from the authors' setup: every training detail (negatives, validation
split, early stopping) is the shared trainer's, documented in ``seed.py``; the
translation pull keeps SEED's weight 2 in ``intra`` so that ``intra + inter`` is SEED.
"""

from __future__ import annotations

import torch

from .heads import LinearResidualHead
from .neural import LEARNING_RATES, NeuralDisentangler
from .seed import SEED_WEIGHTS

INTRA_TERMS = ("translation_meaning_pull", "negative_meaning_push", "language_pull")
INTER_TERMS = ("cross_reconstruction_translation", "cross_reconstruction_language",
               "orthogonality")
INTRA_WEIGHTS = {k: SEED_WEIGHTS[k] for k in INTRA_TERMS}
INTER_WEIGHTS = {k: SEED_WEIGHTS[k] for k in INTER_TERMS}


class _SeedHeadRecipe(NeuralDisentangler):
    weights: dict[str, float] = {}

    def build_head(self, dim: int) -> torch.nn.Module:
        return LinearResidualHead(dim)

    def recipe_weights(self) -> dict[str, float]:
        return dict(self.weights)


class Intra(_SeedHeadRecipe):
    """Only the within-meaning and within-language constraints (L_mean + L_lang)."""

    method = "intra"
    paper = "Nonomura et al. (2026): the intra/inter constraint ablation on SEED's head"
    weights = INTRA_WEIGHTS


class Inter(_SeedHeadRecipe):
    """Only the between-meaning-and-language constraints (L_cross + L_sep)."""

    method = "inter"
    paper = Intra.paper
    hpo_default = {"lr": LEARNING_RATES}
    weights = INTER_WEIGHTS


class Both(_SeedHeadRecipe):
    """intra + inter: SEED's objective under the ablation's name."""

    method = "both"
    paper = Intra.paper
    weights = {**INTRA_WEIGHTS, **INTER_WEIGHTS}
