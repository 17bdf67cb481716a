"""``seed``: SEED (Fukushima et al., 2025), one linear layer splits meaning from language.

    m = W e + b,    l = e - m                      e, m, l: (B, d)

    L   = L_M + L_L + L_C
    L_M = 2 (1 - cos(s_M, t_M)) + max(0, cos(s_M, s'_M)) + max(0, cos(t_M, t'_M))
    L_L = (1 - cos(s_L, s'_L)) + (1 - cos(t_L, t'_L))
    L_C = max(0, cos(s_M, s_L)) + max(0, cos(t_M, t_L))
          + 2 - cos(s, s_M + s'_L) - cos(t, t_M + t'_L)
          + 2 - cos(s, t_M + s_L) - cos(t, s_M + t_L)

``(s, t)`` is a translation pair; ``s'``, ``t'`` are other sentences in the
languages of ``s`` and ``t``. Every term is a batch mean. In the constraint
library: ``2 * translation_meaning_pull + negative_meaning_push`` (L_M),
``language_pull`` (L_L), ``orthogonality + cross_reconstruction_language +
cross_reconstruction_translation`` (L_C). Training: Adam, lr 1e-4, batch 512,
early stopping on validation loss (patience 5, 10% split).

Differences between the paper form (default, ``negatives="paper"``) and the
official code (github EhimeNLP/SEED, ``script/train.py``; ``negatives="official"``):

* Negatives. Official: for each row a random other row of the batch with the same
  language id, drawn in a Python loop with the unseeded ``random`` module (runs are
  not reproducible); a row with no same-language partner uses itself, which makes
  its push term the constant 1 and its language and cross terms trivially satisfied.
  Ours: the same in-batch sampling, vectorised and seeded; with ``"paper"`` rows
  without a partner are left out of the negative terms instead.
* ``s'`` and ``t'`` are sampled independently (as in the official code), and their
  parts are gathered from the batch's forward pass rather than recomputed (same values).
* Validation. Official: negatives re-drawn every epoch, so early stopping compares
  noisy losses; ``"paper"`` fixes them once. The official sums batch losses instead
  of averaging; the minimum is the same epoch either way.
* Batching. Official drops the last partial training batch (``drop_last=True``);
  ``"official"`` does too, ``"paper"`` keeps it.
* Cosine losses. Official uses ``nn.CosineEmbeddingLoss`` with margin 0, which is
  ``1 - cos`` for positives and ``max(0, cos)`` for negatives: the paper's terms.
* Dimension. Official hard-codes d = 1024 (LaBSE-large-sized inputs); ours takes d
  from the data. The validation split comes from a separate file there, a seeded
  10% split here. The best-validation weights are kept in both.
"""

from __future__ import annotations

import torch

from .heads import LinearResidualHead
from .neural import LEARNING_RATES, NeuralDisentangler

SEED_WEIGHTS = {
    "translation_meaning_pull": 2.0,
    "negative_meaning_push": 1.0,
    "language_pull": 1.0,
    "orthogonality": 1.0,
    "cross_reconstruction_language": 1.0,
    "cross_reconstruction_translation": 1.0,
}


class Seed(NeuralDisentangler):
    """SEED; see the module docstring for the objective and official-code differences."""

    method = "seed"
    paper = "Fukushima et al. SEED (2025): one linear layer splits meaning from language"
    hpo_default = {"lr": LEARNING_RATES, "init_scale": [None, 0.9]}

    def build_head(self, dim: int) -> torch.nn.Module:
        return LinearResidualHead(dim)

    def recipe_weights(self) -> dict[str, float]:
        return dict(SEED_WEIGHTS)
