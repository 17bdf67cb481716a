"""A deterministic hash-seeded random encoder: test double and the floor row of result tables.

Each distinct sentence maps to a fixed random unit vector seeded by a hash of its
text, so equal sentences get equal vectors and everything else is unrelated:
any score above chance on a real task measures the method, not the encoder.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from ..exceptions import ConfigError
from .base import EncoderIdentity, check_batch_size, check_texts
from .plugin import EncoderPlugin

#: the largest dimension: real encoders give 384-4096; hash:100000000 once wrote 3.2 GB
#: of cache and output for 4 lines before any error
MAX_DIM = 65536


class HashEncoder(EncoderPlugin):
    """Random but deterministic: ``encode(["a"])`` is the same vector in every run.

    Args:
        dim: output dimension.
        salt: changes all vectors at once (a different "random model").
    """

    backend = "hash"

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict]:
        salt = identity.revision[2:]
        return f"hash:{identity.dim}", ({"salt": salt} if salt else {})

    def __init__(self, dim: int = 64, salt: str = "") -> None:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ConfigError(f"hash encoder: dim must be a positive integer (e.g. hash:64); "
                              f"got {dim!r}")
        if dim > MAX_DIM:
            raise ConfigError(f"hash encoder: dim {dim} is above the limit of {MAX_DIM} (each "
                              f"sentence would take {4 * int(dim):,} bytes in the cache and "
                              "the output); real encoders give 384-4096 dimensions: use e.g. "
                              "hash:384")
        self.dim = int(dim)
        self.salt = salt
        self.name = f"hash:{self.dim}"
        self.identity = EncoderIdentity(
            backend="hash", model="hash", revision=f"v1{salt}", dim=self.dim, pooling="none"
        )

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # (n, d)
        for i, text in enumerate(texts):
            digest = hashlib.sha256((self.salt + text).encode("utf-8")).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            v = rng.standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out
