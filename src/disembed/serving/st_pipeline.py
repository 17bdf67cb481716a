"""The sentence-transformers modules of an export: the base encoder, then the meaning part.

The base encoder's modules come from its backend
(:meth:`~disembed.encoders.EncoderPlugin.export_modules`, rebuilt from the saved
:class:`~disembed.encoders.EncoderIdentity`); a backend without a sentence-transformers
form says so. The meaning part's modules come from the recipe's
:meth:`~disembed.methods.Disentangler.meaning_map`: ``Dense`` layers, or a ``Router`` over
one route of ``Dense`` layers per language.

Normalisation: the backends with an export L2-normalise their output, and disembed fits
and applies the meaning part to that normalised (cached) vector, so ``Normalize`` comes
before the meaning modules and the export reproduces ``model.meaning(encoder.encode(x))``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..data.languages import NO_LANGUAGE, valid_language_subtags
from ..encoders import EncoderIdentity, ExportedBase, encoder_backend
from ..encoders.plugin import st_modules
from ..exceptions import ConfigError
from ..methods import MeaningMap
from ..util.routing_rule import MIN_ROUTE_WEIGHT
from ..util.scripts import SCRIPTS, script_ranges

logger = logging.getLogger(__name__)


def base_pipeline(identity: EncoderIdentity, workdir: Path) -> ExportedBase:
    """Rebuild the encoder ``identity`` names as sentence-transformers modules (asked of
    its backend)."""
    return encoder_backend(identity).export_modules(identity, workdir)


#: file name of :mod:`.exported_module` inside an export, and its class reference
REMOTE_MODULE_FILE = "disembed_meaning.py"
REMOTE_MODULE_REF = "disembed_meaning.LanguageRoutedMeaning"
#: :mod:`.packed_transformer` inside an export (under its own name: the head imports it),
#: and the transformer's packed subclass in it
REMOTE_TRANSFORMER_FILE = "packed_transformer.py"
REMOTE_TRANSFORMER_REF = "packed_transformer.PackedTransformer"
#: :mod:`disembed.util.routing_rule` inside an export (under its own name: the head
#: imports it), copied byte for byte
REMOTE_RULE_FILE = "routing_rule.py"


def identifying_module(mmap: MeaningMap, identifier, aliases: dict[str, str], unknown: str,
                       pooling: str = ""):
    """The routed meaning part with the model's language identifier inside it
    (:class:`.exported_module.LanguageRoutedMeaning`), so an export needs no language.

    ``identifier``: a fitted language identifier (``center_``, ``W_``, ``b_``,
    ``centroids_``, ``threshold_``, ``languages_``, ``route_temperature``); ``unknown``:
    what a language the model never saw gets (a route, ``"mixture"`` or ``"error"``:
    :meth:`~disembed.methods.Disentangler.unseen_route`).

    The module carries the script prior (:mod:`disembed.methods.routing`) without disembed:
    the scripts each identified language is written in
    (:func:`~disembed.data.languages.language_scripts`, computed here, so the export needs
    no ``langcodes``) and the code point table of
    :func:`~disembed.util.scripts.script_ranges` with the names of :data:`SCRIPTS`."""
    import torch

    from .exported_module import LanguageRoutedMeaning

    tensors = {"lid.center": identifier.center_, "lid.W": identifier.W_, "lid.b": identifier.b_,
               "lid.centroids": identifier.centroids_}
    activations = {}
    for name, layers in mmap.routes.items():
        activations[name] = [a.activation for a in layers]
        for i, a in enumerate(layers):
            tensors[f"route.{name}.{i}.weight"] = a.weight
            tensors[f"route.{name}.{i}.bias"] = a.bias
    missing = sorted(set(identifier.languages_) - set(mmap.routes))
    if missing:
        raise ConfigError(f"{mmap.method}'s language identifier knows {missing}, which its "
                          "meaning part has no route for; refit or recalibrate the model")
    return LanguageRoutedMeaning(
        list(identifier.languages_), sorted(mmap.routes), activations, aliases, unknown,
        float(identifier.threshold_), float(identifier.route_temperature),
        str(identifier.route_map), MIN_ROUTE_WEIGHT,
        " ".join(valid_language_subtags()), list(NO_LANGUAGE), pooling,
        language_scripts=identifier.language_scripts(),
        script_names=list(SCRIPTS),
        script_ranges=dict(zip(("starts", "ends", "scripts"), map(list, script_ranges()),
                               strict=True)),
        prior_confidence=None if identifier.prior_confidence is None
        else list(identifier.prior_confidence),
        tensors={k: torch.tensor(np.ascontiguousarray(v, dtype=np.float32))
                 for k, v in tensors.items()})


def meaning_modules(mmap: MeaningMap) -> list:
    """``Dense`` modules (one route), or a ``Router`` over per-language ``Dense`` modules."""
    import torch

    m = st_modules()

    def dense(layers):
        return [m["Dense"](int(a.weight.shape[1]), int(a.weight.shape[0]), bias=True,
                           activation_function=torch.nn.ReLU() if a.activation == "relu"
                           else torch.nn.Identity(),
                           init_weight=torch.tensor(np.ascontiguousarray(a.weight)),
                           init_bias=torch.tensor(np.ascontiguousarray(a.bias)))
                for a in layers]

    if not mmap.by_language:
        return dense(mmap.routes[""])
    if m["Router"] is None:
        raise ConfigError(f"{mmap.method} depends on the language, and the installed "
                          "sentence-transformers has no Router module to route by it; install "
                          "sentence-transformers>=5, or serve the model with 'disembed serve "
                          "--model DIR' (its API takes a language per input)")
    routes = {lang: dense(layers) for lang, layers in sorted(mmap.routes.items())}
    return [m["Router"](routes, default_route=None, allow_empty_key=False)]
