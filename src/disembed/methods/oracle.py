"""``oracle``: ORACLE (Ki et al., 2024), two constraints added to DREAM or MEAT, or used alone.

    L_IC = (1/N) sum_{i != j, same language} (2 - cos(s_L^i, s_L^j) - cos(t_L^i, t_L^j))
    L_IS = (1/N) sum_i max(0, cos(s_M^i, s_L^i)) + max(0, cos(t_M^i, t_L^i))
    L    = L_base + w (L_IC + L_IS)              w = ``oracle_weight`` (1 in the paper)

L_IC (intra-class clustering) pulls together the language parts of every pair of
same-language sentences in the batch; L_IS (inter-class separation) makes meaning and
language parts of one sentence orthogonal (or opposed). ``L_base`` is DREAM's or MEAT's
loss, or nothing (``oracle`` alone, on DREAM/MEAT's two linear heads).

ORACLE is data, not a class of its own: every trained recipe takes the hyperparameters
``oracle_variant`` (``None``: off) and ``oracle_weight``, and adds these terms to its own
(:meth:`~.neural.NeuralDisentangler.term_weights`). The registered names
``oracle+dream`` and ``oracle+meat`` are DREAM and MEAT with ``oracle_variant="paper"``;
any trained recipe composes on demand (``oracle+seed``). The forms of the two terms
(``"paper"``, ``"official-new"``, ``"official-old"``, ``"official-main"``) and how they
differ from the official code are in :mod:`.oracle_variants`.

Other differences from the official code: the official oracle terms see the whole
batch while its DREAM terms see half of it (see ``dream.py``); ours see the same rows.
The official schedules (lr 1e-5, patience 10) are described in ``dream.py``/``meat.py``.
The official ``alone1``..``alone5`` ablations mix ORACLE with parts of the base loss;
our ``oracle`` alone is the two terms only: nothing ties ``m`` to the input then, so
expect a weak meaning part (it is the paper's "ORACLE only" ablation, not a method).
"""

from __future__ import annotations

from ..util.constraints import Options
from .neural import TwoHeadRecipe
from .oracle_variants import ORACLE_PAPER, ORACLE_VARIANTS, oracle_weights

__all__ = ["ORACLE_VARIANTS", "Oracle", "oracle_weights"]


class Oracle(TwoHeadRecipe):
    """ORACLE's two terms alone on two linear heads; see the module docstring."""

    method = "oracle"
    paper = ORACLE_PAPER
    oracle_only = True
    _parameter_constraints = {**TwoHeadRecipe._parameter_constraints,
                              "oracle_variant": [Options(*ORACLE_VARIANTS)]}

    def __init__(self, lr: float = 1e-4, batch_size: int = 512, max_epochs: int | None = None,
                 patience: int = 5, val_fraction: float = 0.1, seed: int = 0,
                 negatives: str = "paper", hidden: int = 0, *, max_steps: int | None = None,
                 time_budget_seconds: float | None = None, oracle_variant: str = "paper",
                 oracle_weight: float = 1.0, center: str = "none",
                 unknown_language: str = "global", deterministic: bool = True,
                 speed: str = "auto", precision: str = "auto",
                 init_scale: float | None = None, mirror: bool = False,
                 reference_check: float | None = None,
                 min_epoch_steps: int | None = None) -> None:
        super().__init__(lr=lr, batch_size=batch_size, max_epochs=max_epochs, patience=patience,
                         val_fraction=val_fraction, seed=seed, negatives=negatives, hidden=hidden,
                         max_steps=max_steps, time_budget_seconds=time_budget_seconds,
                         oracle_variant=oracle_variant, oracle_weight=oracle_weight,
                         center=center, unknown_language=unknown_language,
                         deterministic=deterministic, speed=speed, precision=precision,
                         init_scale=init_scale, mirror=mirror,
                         reference_check=reference_check, min_epoch_steps=min_epoch_steps)

    def recipe_weights(self) -> dict[str, float]:
        return {}
