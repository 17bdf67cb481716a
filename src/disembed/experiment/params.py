"""The one owner of "which hyperparameters does this method get".

A run's own parameters must all be accepted by its method (a typo is an error, not a
silently ignored setting); experiment-wide overrides (``bench --lr``) go only to the
methods that take them. The run's seed is passed to every method that takes a seed.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..exceptions import ConfigError
from ..methods import Disentangler, make_method, method_class

#: the methods ``disembed tune`` tries unless told otherwise (each with its own grid)
DEFAULT_TUNE_METHODS = ("baseline", "mean-centering", "seed", "seed-centered", "inter",
                        "lir", "lsar", "leace")


def method_params(method: str, params: Mapping[str, Any], *, seed: int | None = None
                  ) -> dict[str, Any]:
    """``params`` checked against what ``method`` takes, plus ``seed`` where it takes one."""
    accepted = method_class(method).param_names()
    unknown = sorted(k for k in params if k not in accepted)
    if unknown:
        raise ConfigError(f"{method} takes no {', '.join(unknown)}; its hyperparameters are: "
                          f"{', '.join(accepted) or 'none'}")
    out = dict(params)
    if seed is not None and "seed" in accepted:
        out.setdefault("seed", seed)
    return out


def build_method(method: str, params: Mapping[str, Any], *, seed: int | None = None
                 ) -> Disentangler:
    """An unfitted ``method`` with ``params``, every setting checked now (before any data
    is embedded): unknown names, and a trained recipe's training settings (lr, epochs...)."""
    model = make_method(method, **method_params(method, params, seed=seed))
    getattr(model, "train_config", None)  # trained recipes validate it (ConfigError)
    return model


def shared_overrides(methods: Sequence[str], overrides: Mapping[str, Any]
                     ) -> dict[str, dict[str, Any]]:
    """Per method, the subset of ``overrides`` (``None`` values dropped) it takes."""
    given = {k: v for k, v in overrides.items() if v is not None}
    out = {}
    for method in methods:
        accepted = method_class(method).param_names()
        taken = {k: v for k, v in given.items() if k in accepted}
        if taken:
            out[method] = taken
    return out


__all__ = ["build_method", "method_params", "shared_overrides"]
