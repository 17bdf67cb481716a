"""The one owner of "which hyperparameters does this method get".

A run's own parameters must all be accepted by its method (a typo is an error, not a
silently ignored setting); experiment-wide overrides (``bench --lr``) go only to the
methods that take them. The run's seed is passed to every method that takes a seed.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..exceptions import ConfigError
from ..methods import Disentangler, make_method, method_class
from ..util.constraints import check_grid

#: the methods ``disembed tune`` tries unless told otherwise (each with its own grid)
DEFAULT_TUNE_METHODS = ("baseline", "mean-centering", "seed", "seed-centered", "inter",
                        "lir", "lsar", "leace")


def method_params(method: str, params: Mapping[str, Any], *, seed: int | None = None
                  ) -> dict[str, Any]:
    """``params`` checked against what ``method`` takes, plus ``seed`` where it takes one."""
    cls = method_class(method)
    cls.check_params(dict(params), owner=method)
    accepted = cls.param_names()
    out = dict(params)
    if seed is not None and "seed" in accepted:
        out.setdefault("seed", seed)
    return out


def build_method(method: str, params: Mapping[str, Any], *, seed: int | None = None
                 ) -> Disentangler:
    """An unfitted ``method`` with ``params``, every setting checked now (before any data
    is embedded): unknown names, and a trained recipe's training settings (lr, epochs...)."""
    model = make_method(method, **method_params(method, params, seed=seed))
    model.check_settings()  # a trained recipe's training settings (ConfigError)
    return model


def _by_method(mapping: Any, source: str, what: str) -> Mapping[str, Any]:
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"{source} must map method names to {what}, e.g. "
                          f'{{"seed": {{"lr": 0.001}}}}; got {type(mapping).__name__}')
    for method, entry in mapping.items():
        try:
            method_class(method)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{source}: the entry of {method} must be a mapping of "
                              f"{what}; got {entry!r}")
    return mapping


def check_method_params(by_method: Any, source: str = "params") -> None:
    """``{method: {param: value}}`` (a ``--params`` file): every method a known name and
    every setting of every method checked (name, type, range), whether the run uses that
    method or not, so a typo is never silently dropped."""
    for method, params in _by_method(by_method, source, "settings").items():
        method_class(method).check_params(dict(params), owner=f"{source}: {method}")


def check_method_grids(by_method: Any, source: str = "grid") -> None:
    """``{method: {param: [values]}}`` (a tuning grid): as :func:`check_method_params`,
    and every entry a non-empty list."""
    for method, grid in _by_method(by_method, source, "lists of values").items():
        cls = method_class(method)
        check_grid(f"{source}: {method}", grid, cls.param_names(), cls._parameter_constraints)


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


#: the parameter of a recipe's training seed (and the key of a run spec's seed)
SEED_PARAM = "seed"


def takes_seed(method: str) -> bool:
    """Whether ``method`` has a training seed (a closed-form recipe gives the same fit on
    every seed, so it is fitted once)."""
    return SEED_PARAM in method_class(method).param_names()


__all__ = ["SEED_PARAM", "build_method", "check_method_grids", "check_method_params",
           "method_params", "takes_seed",
           "shared_overrides"]
