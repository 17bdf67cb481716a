"""Method names that are a registered recipe with some hyperparameters switched on.

``oracle+meat`` is :class:`~.meat.Meat` with ``oracle_variant="paper"``; ``seed-centered``
is :class:`~.seed.Seed` with ``center="language"``. They are data (:data:`ALIASES`), not
generated classes: the registry lists each name against its recipe's class, and
:func:`resolve` turns a name into ``(class, params)``. Beyond the table, two rules
compose on demand with any trained recipe: ``oracle+<name>`` (or ``<name>+oracle``)
switches ORACLE on, ``<name>-centered`` switches centering on (``oracle+seed``,
``meat-centered``, ``oracle+dream-centered``). So the name a trained model gives itself
(:attr:`~.neural.NeuralDisentangler.name`) always resolves back to its class.

The params of an alias are defaults the caller may change (``make_method("oracle+meat",
oracle_variant="official-new")``) but not switch off (``oracle_variant=None`` is plain
``meat``; asking for it under the ``oracle+meat`` name is an error).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..exceptions import ConfigError, UnknownNameError
from ..registry import Registry
from .base import Disentangler
from .neural import NeuralDisentangler

#: name -> (registered recipe, hyperparameters it switches on)
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "oracle+dream": ("dream", {"oracle_variant": "paper"}),
    "oracle+meat": ("meat", {"oracle_variant": "paper"}),
    "seed-centered": ("seed", {"center": "language"}),
}

#: what ``disembed tune`` adds to the recipe's own grid (``hpo_default``) for an alias
ALIAS_GRIDS: dict[str, dict[str, list]] = {
    "oracle+meat": {"oracle_variant": ["official-new"]},
    # a second fit from the mirrored meaning bias, kept when WMT20 QE dev prefers it (issue 37,
    # docs/seed_basins.md): chosen over seeds with ``tune --seeds``
    "seed-centered": {"mirror": [False, True]},
}

_ORACLE_ON = {"oracle_variant": "paper"}
_CENTERED = "-centered"


def register_aliases(registry: Registry[type[Disentangler]]) -> None:
    """List every alias in ``registry`` against its recipe's class."""
    for name, (base, _) in ALIASES.items():
        registry.add(name, registry.get(base))


def composable(registry: Registry[type[Disentangler]]) -> list[str]:
    """Registered trained recipes that ``oracle+<name>`` accepts."""
    return [n for n in registry if _is_composable(registry.get(n)) and n not in ALIASES]


def _is_composable(cls: type) -> bool:
    return issubclass(cls, NeuralDisentangler) and not cls.oracle_only


def resolve(registry: Registry[type[Disentangler]], name: str
            ) -> tuple[type[Disentangler], dict[str, Any]]:
    """``(class, switched-on params)`` of a method name (raises with a suggestion)."""
    if name in ALIASES:
        base, params = ALIASES[name]
        return registry.get(base), dict(params)
    if name.endswith(_CENTERED) and name not in registry:
        cls, params = resolve(registry, name[: -len(_CENTERED)])
        if not issubclass(cls, NeuralDisentangler) or params.get("center", "none") != "none":
            raise UnknownNameError(f"cannot centre {name[: -len(_CENTERED)]!r}: "
                                   "'<name>-centered' takes a trained recipe "
                                   f"({', '.join(composable(registry))}, oracle)")
        return cls, {**params, "center": "language"}
    parts = [p.strip() for p in name.split("+")]
    if len(parts) == 2 and "oracle" in parts:
        base_name = parts[1] if parts[0] == "oracle" else parts[0]
        cls, params = resolve(registry, base_name)
        if not _is_composable(cls) or params.get("oracle_variant") is not None:
            raise UnknownNameError(f"cannot compose ORACLE with {base_name!r}; it composes with "
                                   f"one trained recipe: {', '.join(composable(registry))}")
        return cls, {**params, **_ORACLE_ON}
    return registry.get(name), {}


def merge_params(name: str, switched_on: Mapping[str, Any],
                 params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` over the alias defaults; an alias's switch may change but not turn off."""
    for key, value in params.items():
        if key in switched_on and value in (None, "none"):
            raise ConfigError(f"{name!r} means {key}={switched_on[key]!r} (or another "
                              f"setting); {key}={value!r} turns it off: use the recipe's own "
                              "name for that")
    return {**switched_on, **params}


def tuning_grid(registry: Registry[type[Disentangler]], name: str) -> dict[str, list]:
    """What ``disembed tune`` tries for method ``name``: its recipe's ``hpo_default`` and the
    alias's own additions (:data:`ALIAS_GRIDS`)."""
    cls, _ = resolve(registry, name)
    return {**cls.hpo_default, **ALIAS_GRIDS.get(name, {})}
