"""Names -> recipes: the method registry, building a method by name, loading a saved one.

Adding a recipe is one file (its class, with ``method``, ``uses_language``, ``hpo_default``
and ``meaning_map``) plus one line in :data:`METHODS` below; the contract tests in
``tests/methods/test_plugin_contract.py`` then run it through save/load, serve, export
and tune.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..exceptions import CheckpointError, ConfigError
from ..registry import Registry
from . import aliases
from .base import Disentangler, read_saved
from .baseline import Baseline
from .centered_eraser import CenteredEraser
from .dream import Dream
from .intra_inter import Both, Inter, Intra
from .leace import Leace
from .linear_map import LinearMap
from .lir import Lir
from .lsar import Lsar
from .mean_centering import MeanCentering
from .meat import Meat
from .oracle import Oracle
from .seed import Seed
from .whitening import Whitening

METHODS: Registry[type[Disentangler]] = Registry("method")
METHODS.add(Baseline.method, Baseline)
METHODS.add(MeanCentering.method, MeanCentering)
METHODS.add(Seed.method, Seed)
METHODS.add(Dream.method, Dream)
METHODS.add(Meat.method, Meat)
METHODS.add(Oracle.method, Oracle)
METHODS.add(Intra.method, Intra)
METHODS.add(Inter.method, Inter)
METHODS.add(Both.method, Both)
METHODS.add(LinearMap.method, LinearMap)
METHODS.add(Lir.method, Lir)
METHODS.add(Lsar.method, Lsar)
METHODS.add(Leace.method, Leace)
METHODS.add(Whitening.method, Whitening)
METHODS.add(CenteredEraser.method, CenteredEraser)

aliases.register_aliases(METHODS)

logger = logging.getLogger(__name__)


def composable() -> list[str]:
    """Registered trained recipes that ``oracle+<name>`` accepts."""
    return aliases.composable(METHODS)


def method_class(name: str) -> type[Disentangler]:
    """The class of method ``name``: a registered name, an alias or ``"oracle+<recipe>"``."""
    return aliases.resolve(METHODS, name)[0]


def make_method(name: str, **params) -> Disentangler:
    """A new, unfitted method by name (``"seed"``, ``"mean-centering"``, ``"oracle+meat"``...);
    an alias's switched-on hyperparameters are defaults under ``params``."""
    cls, switched_on = aliases.resolve(METHODS, name)
    params = aliases.merge_params(name, switched_on, params)
    cls.check_params(params, owner=name)  # names ("did you mean"), types and ranges
    return cls(**params)


def identity_method() -> Disentangler:
    """The recipe whose meaning part is the raw embedding: what a bare encoder serves."""
    return Baseline()


def tuning_grid(name: str) -> dict[str, list]:
    """What ``disembed tune`` tries for method ``name`` by default (the recipe's
    ``hpo_default``, with an alias's additions)."""
    return aliases.tuning_grid(METHODS, name)


def load_disentangler(directory: str | Path) -> Disentangler:
    """Load a saved disentangler; the weights' checksum, every key and every shape are
    checked against its config.

    ``method`` is a registered name, an alias or a composed name (``"oracle+meat"``), its
    params the hyperparameters; both go to :func:`make_method`, so models saved when
    ``oracle+meat`` was a generated class (params holding ``oracle_variant``/
    ``oracle_weight``) load as MEAT with ORACLE's terms.
    """
    cfg_path, config, state = read_saved(Path(directory))
    params = dict(config["params"])
    if params.get("unknown_language") == "batch":  # transductive: a vector depended on its batch
        logger.warning("%s was saved with unknown_language='batch' (centring an unseen "
                       "language by the rows of the call), which no longer exists; it now "
                       "uses 'global' (the mean over the training languages)", cfg_path)
        params["unknown_language"] = "global"
    try:
        model = make_method(config["method"], **params)
    except (TypeError, ConfigError) as exc:
        raise CheckpointError(f"{cfg_path}: its params do not fit {config['method']} "
                              f"({exc}); was it saved by another disembed version?") from None
    model.dim_ = config["dim"]
    model.restore(state, config.get("learned", {}))
    model.metadata_ = config.get("metadata", {})
    return model
