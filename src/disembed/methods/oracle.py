"""``oracle``: ORACLE (Ki et al., 2024), two constraints added to DREAM or MEAT, or used alone.

    L_IC = (1/N) sum_{i != j, same language} (2 - cos(s_L^i, s_L^j) - cos(t_L^i, t_L^j))
    L_IS = (1/N) sum_i max(0, cos(s_M^i, s_L^i)) + max(0, cos(t_M^i, t_L^i))
    L    = L_base + w (L_IC + L_IS)              w = ``oracle_weight`` (1 in the paper)

L_IC (intra-class clustering) pulls together the language parts of every pair of
same-language sentences in the batch; L_IS (inter-class separation) makes meaning and
language parts of one sentence orthogonal (or opposed). ``L_base`` is DREAM's or MEAT's
loss (``oracle+dream``, ``oracle+meat``; any trained recipe composes:
``oracle+seed``), or nothing (``oracle`` alone, on DREAM/MEAT's two linear heads).

``oracle_variant`` picks the form of the two terms, as constraint-library presets:

* ``"paper"`` (default): ``language_cluster + orthogonality``. The clustering uses a
  per-language mask over all ``B x B`` pairs ``i != j``, separately for the ``s`` and the
  ``t`` side, so a batch that mixes target languages never pulls two languages together.
  Our L_IS is the ``orthogonality`` term SEED also uses.
* ``"official-new"``: the official code's default (``train_type: oracle_new`` in every
  shipped config, github dayeonki/oracle ``code/loss/{dream,meat}.py`` ``OracleNewLoss``):
  ``language_cluster_batch + language_push_translation``, i.e. L_IC over *all* ``B x B``
  pairs of the batch, diagonal included, whatever their languages, and instead of L_IS
  ``max(0, cos(s_L, t_L))``, which separates the two language parts of a translation pair
  and never compares meaning with language.
* ``"official-old"`` (``OracleLoss``, closest to the paper's text in that code):
  ``translation_meaning_pull + language_cluster_batch + orthogonality_abs +
  language_push_translation``: L_IC also pulls translation meanings together (the code
  adds a (B,) cosine to (B, B) matrices; its mean is this sum), and L_IS uses
  ``|cos(m, l)|`` instead of the hinge, plus the language-pair push.
* ``"official-main"`` (``OracleMainLoss``): ``0.5 * orthogonality`` (a mean of the two
  hinge means), no clustering.

Other differences from the official code: the official oracle terms see the whole
batch while its DREAM terms see half of it (see ``dream.py``); ours see the same rows.
The official schedules (lr 1e-5, patience 10) are described in ``dream.py``/``meat.py``.
The official ``alone1``..``alone5`` ablations mix ORACLE with parts of the base loss;
our ``oracle`` alone is the two terms only: nothing ties ``m`` to the input then, so
expect a weak meaning part (it is the paper's "ORACLE only" ablation, not a method).
"""

from __future__ import annotations

import inspect

from ..exceptions import ConfigError
from .constraints import add_weights
from .neural import NeuralDisentangler, TwoHeadRecipe

ORACLE_VARIANTS: dict[str, dict[str, float]] = {
    "paper": {"language_cluster": 1.0, "orthogonality": 1.0},
    "official-new": {"language_cluster_batch": 1.0, "language_push_translation": 1.0},
    "official-old": {"translation_meaning_pull": 1.0, "language_cluster_batch": 1.0,
                     "orthogonality_abs": 1.0, "language_push_translation": 1.0},
    "official-main": {"orthogonality": 0.5},
}


def oracle_weights(variant: str = "paper", weight: float = 1.0) -> dict[str, float]:
    """The ORACLE terms of ``variant``, each multiplied by ``weight``."""
    if variant not in ORACLE_VARIANTS:
        raise ConfigError(f"oracle_variant must be one of {sorted(ORACLE_VARIANTS)}; "
                          f"got {variant!r}")
    return {name: weight * w for name, w in ORACLE_VARIANTS[variant].items()}


class Oracle(TwoHeadRecipe):
    """ORACLE's two terms alone on two linear heads; see the module docstring."""

    method = "oracle"

    def __init__(self, lr: float = 1e-4, batch_size: int = 512, max_epochs: int | None = None,
                 patience: int = 5, val_fraction: float = 0.1, seed: int = 0,
                 negatives: str = "paper", hidden: int = 0, oracle_variant: str = "paper",
                 oracle_weight: float = 1.0, *, max_steps: int | None = None,
                 time_budget_seconds: float | None = None) -> None:
        super().__init__(lr=lr, batch_size=batch_size, max_epochs=max_epochs, patience=patience,
                         val_fraction=val_fraction, seed=seed, negatives=negatives, hidden=hidden,
                         max_steps=max_steps, time_budget_seconds=time_budget_seconds)
        oracle_weights(oracle_variant)  # validate now, not at fit time
        self.oracle_variant, self.oracle_weight = oracle_variant, oracle_weight

    def term_weights(self) -> dict[str, float]:
        return oracle_weights(self.oracle_variant, self.oracle_weight)


def with_oracle(base: type[NeuralDisentangler]) -> type[NeuralDisentangler]:
    """``base`` plus ORACLE: same head and adversary, weights ``base + w * ORACLE``.

    The new class takes ``base``'s hyperparameters plus ``oracle_variant`` and
    ``oracle_weight`` and is named ``"oracle+<base.method>"``.
    """
    if not (isinstance(base, type) and issubclass(base, NeuralDisentangler)):
        raise ConfigError(f"ORACLE composes with a trained recipe (dream, meat, seed, ...); "
                          f"got {base!r}")
    base_sig = inspect.signature(base.__init__)

    def __init__(self, *args, oracle_variant: str = "paper", oracle_weight: float = 1.0,
                 **kwargs) -> None:
        base.__init__(self, *args, **kwargs)
        oracle_weights(oracle_variant)
        self.oracle_variant, self.oracle_weight = oracle_variant, oracle_weight

    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
             for name, default in (("oracle_variant", "paper"), ("oracle_weight", 1.0))]
    kept = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.name != "self" else p
            for p in base_sig.parameters.values()]
    __init__.__signature__ = base_sig.replace(parameters=kept + extra)  # type: ignore[attr-defined]

    def term_weights(self) -> dict[str, float]:
        return add_weights(base.term_weights(self),
                           oracle_weights(self.oracle_variant, self.oracle_weight))

    name = f"Oracle{base.__name__}"
    return type(name, (base,), {
        "__init__": __init__, "term_weights": term_weights, "method": f"oracle+{base.method}",
        "__doc__": f"{base.__name__} + ORACLE (see disembed.methods.oracle)",
        "__module__": __name__})
