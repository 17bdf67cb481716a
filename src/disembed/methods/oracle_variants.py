"""ORACLE's two terms in each of their forms, as constraint-library presets.

Any trained recipe adds them with its ``oracle_variant`` hyperparameter (``None``:
off) times ``oracle_weight`` (see :mod:`.oracle` for the paper's equations and the
``oracle`` recipe, which has these terms only):

* ``"paper"``: ``language_cluster + orthogonality``. The clustering uses a
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
"""

from __future__ import annotations

from ..exceptions import ConfigError

#: the paper of ORACLE, cited by every recipe that switches its terms on
ORACLE_PAPER = ("Ki et al. ORACLE: orthogonality constraints against semantic leakage in "
                "cross-lingual embeddings (2024)")

ORACLE_VARIANTS: dict[str, dict[str, float]] = {
    "paper": {"language_cluster": 1.0, "orthogonality": 1.0},
    "official-new": {"language_cluster_batch": 1.0, "language_push_translation": 1.0},
    "official-old": {"translation_meaning_pull": 1.0, "language_cluster_batch": 1.0,
                     "orthogonality_abs": 1.0, "language_push_translation": 1.0},
    "official-main": {"orthogonality": 0.5},
}


def check_oracle_variant(variant: str | None, *, allow_none: bool = True) -> None:
    """Raise ``ConfigError`` unless ``variant`` names an ORACLE form (or is ``None``: off)."""
    if variant is None and allow_none:
        return
    if variant not in ORACLE_VARIANTS:
        off = " or None (no ORACLE terms)" if allow_none else ""
        raise ConfigError(f"oracle_variant must be one of {sorted(ORACLE_VARIANTS)}{off}; "
                          f"got {variant!r}")


def oracle_weights(variant: str = "paper", weight: float = 1.0) -> dict[str, float]:
    """The ORACLE terms of ``variant``, each multiplied by ``weight``."""
    check_oracle_variant(variant, allow_none=False)
    return {name: weight * w for name, w in ORACLE_VARIANTS[variant].items()}
