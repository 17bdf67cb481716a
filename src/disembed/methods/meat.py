"""``meat``: MEAT (Kuroda et al., 2022), two heads trained against a language discriminator.

    m = MLP_m(e),   l = MLP_l(e),   D(m) = W_D m + b_D            e, m, l: (B, d); D: (B, K)

    generator (heads):   L = L_rec + L_cross + L_lang + L_adv
        L_rec   = (1 - cos(s, s_M + s_L)) + (1 - cos(t, t_M + t_L))
        L_cross = (1 - cos(s, t_M + s_L)) + (1 - cos(t, s_M + t_L))
        L_lang  = max(0, cos(s_L, t_L))
        L_adv   = CE(D(s_M), u) + CE(D(t_M), u)          u = (1/K, ..., 1/K)
    discriminator:       L_D = CE(D(s_M), lang(s)) + CE(D(t_M), lang(t))    (m detached)

Updates alternate on every batch: one Adam step of ``D`` on ``L_D``, then one of the
heads on ``L`` (the trainer's :class:`~disembed.training.Adversary` hook). In the
constraint library: ``reconstruction_cos + cross_reconstruction_translation +
language_push_translation + adversarial_uniform`` (all weight 1). Inference:
``meaning = m``, ``language = l``.

Differences from the official code (github EhimeNLP/MEAT ``script/train.py`` and
``script/model.py``; the copy in dayeonki/oracle ``code/loss/meat.py`` is the same):

* Heads: one ``Linear(d, d)`` each there; our default ``hidden=0`` is the same,
  ``hidden=h > 0`` gives two-layer ReLU MLPs. ``D`` is one ``Linear(d, K)`` in both.
* The official discriminator loss is computed through the heads with gradients (then
  discarded by ``zero_grad``); ours detaches ``m``: the same update, less work.
* Optimisation. Official: Adam lr 1e-5 for both optimisers, batch 512,
  ``drop_last=True``, patience 10 on the summed validation loss, seed 100. Ours: the
  shared trainer (lr 1e-4 for both, patience 5, seeded 10% split); pass
  ``lr=1e-5, patience=10`` for the official schedule. The validation loss is the
  generator loss with the current discriminator in both.
* The discriminator is not saved with the model (inference needs only the heads).
  Its weights and optimiser state are in the training checkpoint, so a resumed run
  continues the same alternating game.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..training import Batch, full_precision
from .neural import LEARNING_RATES, TwoHeadRecipe

MEAT_WEIGHTS = {
    "reconstruction_cos": 1.0,
    "cross_reconstruction_translation": 1.0,
    "language_push_translation": 1.0,
    "adversarial_uniform": 1.0,
}


class Meat(TwoHeadRecipe):
    """MEAT; see the module docstring for the objective and official-code differences."""

    method = "meat"
    paper = ("Kuroda et al. MEAT: adversarial training on disentangling meaning and language "
             "representations for unsupervised quality estimation. COLING 2022")
    hpo_default = {"lr": LEARNING_RATES}

    def recipe_weights(self) -> dict[str, float]:
        return dict(MEAT_WEIGHTS)

    def build_adversary(self, dim: int) -> torch.nn.Module:
        return torch.nn.Linear(dim, len(self.languages_))

    def adversary_loss(self, batch: Batch) -> torch.Tensor:
        """``L_D``: the discriminator names the language of the (detached) meaning parts."""
        n = len(batch.s)
        with torch.no_grad():
            M, _ = self.head_(torch.cat([batch.s, batch.t]))  # (2B, d)
        with full_precision():  # only the head's products may run in bfloat16
            logits = self.discriminator_(M.float())  # (2B, K)
            return (F.cross_entropy(logits[:n], batch.s_lang)
                    + F.cross_entropy(logits[n:], batch.t_lang))
