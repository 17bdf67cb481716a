"""``dream``: DREAM (Tiyajamorn et al., EMNLP 2021), two heads and a language classifier.

    m = MLP_m(e),   l = MLP_l(e),   p = softmax(W_c l + b_c)      e, m, l: (B, d); p: (B, K)

    L   = L_R + L_S + L_L + L_LID
    L_R = mse(s_M + s_L, s) + mse(t_M + t_L, t)                   (mean over rows and dims)
    L_S = (1 - cos(s_M, t_M)) + max(0, cos(s_M, s'_M)) + max(0, cos(t_M, t'_M))
    L_L = (1 - cos(s_L, s'_L)) + (1 - cos(t_L, t'_L))
    L_LID = CE(p(s_L), lang(s)) + CE(p(t_L), lang(t))

``(s, t)`` is a translation pair, ``s'``/``t'`` another sentence of the language of
``s``/``t`` in the same batch, ``K`` the number of training languages. In the
constraint library: ``reconstruction_mse + translation_meaning_pull +
negative_meaning_push + language_pull + language_identification`` (all weight 1).
Inference: ``meaning = m``, ``language = l``.

Differences from the official code (the DREAM/ORACLE code in github dayeonki/oracle,
``code/loss/dream.py`` + ``decomposer/script/model/dream.py``; the EhimeNLP/MEAT repo
ships the same ``DREAM_MLP``):

* Heads. The official "MLP"s are one ``Linear(d, d)`` each; that is our default
  (``hidden=0``). ``hidden=h > 0`` gives ``Linear -> ReLU -> Linear`` MLPs instead.
* Negatives. Official: each batch is cut in halves and row ``i`` of the second half is
  the "random" sentence of row ``i`` of the first half, whatever its language, so L_L
  pulls together language parts of *different* languages whenever the batch mixes
  them, and only the first half gets L_S, L_R, L_LID. Ours: every row, with a seeded
  same-language in-batch negative (as the paper describes L_L: one language, one
  language part); rows without a same-language partner leave the negative terms.
* The official code also computes ``max(0, cos(s_L, t_L))`` but drops it from the sum;
  so do we (MEAT uses it: ``language_push_translation``).
* Optimisation. Official: Adam lr 1e-5, batch 512, no epoch cap, patience 10 on the
  summed validation loss, a separate validation file, ``drop_last=True``. Ours: the
  shared trainer defaults (Adam lr 1e-4, batch 512, no epoch cap either, patience 5,
  seeded 10% split);
  pass ``lr=1e-5, patience=10`` for the official schedule.
* Number of classes. Official hard-codes ``n_languages`` in the config (13 for LaBSE
  runs); ours is the number of languages in the training pairs (both sides).
"""

from __future__ import annotations

from .neural import LEARNING_RATES, TwoHeadRecipe

DREAM_WEIGHTS = {
    "reconstruction_mse": 1.0,
    "translation_meaning_pull": 1.0,
    "negative_meaning_push": 1.0,
    "language_pull": 1.0,
    "language_identification": 1.0,
}


class Dream(TwoHeadRecipe):
    """DREAM; see the module docstring for the objective and official-code differences."""

    method = "dream"
    paper = ("Tiyajamorn et al. *Language-agnostic Representation from Multilingual Sentence "
             "Encoders for Cross-lingual Similarity Estimation* (DREAM). EMNLP 2021")
    hpo_default = {"lr": LEARNING_RATES}
    language_classifier = True

    def recipe_weights(self) -> dict[str, float]:
        return dict(DREAM_WEIGHTS)
