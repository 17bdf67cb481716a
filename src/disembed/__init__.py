"""disembed: split multilingual sentence embeddings into meaning and language."""

from __future__ import annotations

import logging

__version__ = "0.1.0"

logging.getLogger("disembed").addHandler(logging.NullHandler())

from .encoders import DEFAULT_ENCODER, Encoder, EncoderIdentity, load_encoder  # noqa: E402

__all__ = ["__version__", "DEFAULT_ENCODER", "Encoder", "EncoderIdentity", "load_encoder"]
