"""Disentanglement methods, one recipe per file, all behind :class:`Disentangler`.

Trained recipes are presets over one library of weighted constraint terms
(:mod:`.constraints`). Some registered names are a recipe with hyperparameters switched
on (:mod:`.aliases`): ``oracle+dream``, ``oracle+meat`` (ORACLE's terms added),
``seed-centered`` (SEED on per-language-centred inputs); ``"oracle+<recipe>"`` composes
ORACLE with any trained recipe on demand.
"""

from __future__ import annotations

from .base import Disentangler, fitting, resolving
from .baseline import Baseline
from .catalog import (
    METHODS,
    composable,
    identity_method,
    load_disentangler,
    make_method,
    method_class,
    tuning_grid,
)
from .dream import Dream
from .export_map import GLOBAL_ROUTE, Affine, MeaningMap, apply_map
from .intra_inter import Both, Inter, Intra
from .leace import Leace
from .linear_map import LinearMap
from .lir import Lir
from .lsar import Lsar
from .mean_centering import MeanCentering
from .meat import Meat
from .neural import NeuralDisentangler
from .oracle import Oracle
from .seed import Seed

__all__ = ["GLOBAL_ROUTE", "METHODS", "Affine", "Baseline", "Both", "Disentangler", "Dream",
           "fitting", "resolving",
           "Inter", "Intra", "Leace", "LinearMap", "Lir", "Lsar", "MeanCentering",
           "MeaningMap", "Meat", "NeuralDisentangler", "Oracle", "Seed", "apply_map",
           "composable", "identity_method", "load_disentangler", "make_method", "method_class",
           "tuning_grid"]
