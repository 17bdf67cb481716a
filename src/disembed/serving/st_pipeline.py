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

from ..encoders import EncoderIdentity, ExportedBase, encoder_backend
from ..encoders.plugin import st_modules
from ..exceptions import ConfigError
from ..methods import MeaningMap

logger = logging.getLogger(__name__)


def base_pipeline(identity: EncoderIdentity, workdir: Path) -> ExportedBase:
    """Rebuild the encoder ``identity`` names as sentence-transformers modules (asked of
    its backend)."""
    return encoder_backend(identity).export_modules(identity, workdir)


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
