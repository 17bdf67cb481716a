"""Build the service's encoder and method from a saved model or an encoder spec."""

from __future__ import annotations

import logging
import os

from ..encoders import Encoder, load_encoder
from ..encoders.write_behind import WriteBehindEncoder
from ..exceptions import ConfigError
from ..methods import Disentangler, identity_method
from ..saved_model import SavedModel
from .service import EmbeddingService

logger = logging.getLogger(__name__)

def load_service(model_dir: str | os.PathLike | None = None, encoder_spec: str | None = None, *,
                 encoder_options: dict | None = None, cache_dir: str | None = None,
                 use_cache: bool = True) -> EmbeddingService:
    """The service for a saved model (its own encoder unless ``encoder_spec`` is given; see
    :class:`~disembed.saved_model.SavedModel`) or a bare encoder (meaning = raw)."""
    if model_dir is None and encoder_spec is None:
        raise ConfigError("serve needs --model DIR (a trained model) or --encoder SPEC")
    model: Disentangler
    if model_dir is not None:
        encoder, model = SavedModel.load(model_dir, encoder_spec, encoder_options)
    else:
        encoder = load_encoder(encoder_spec, **dict(encoder_options or {}))
        model = identity_method()
    # the cache writes behind the requests: no micro-batch waits for a shard's fsync
    served: Encoder = WriteBehindEncoder(encoder, cache_dir) if use_cache else encoder
    label = str(model_dir) if model_dir is not None else str(encoder_spec)
    logger.info("serving %s on %s", model.name, served.name)
    return EmbeddingService(served, model, label=label)
