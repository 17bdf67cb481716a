"""What the HTTP service computes, without HTTP: views of embeddings, similarities, QE scores.

An :class:`EmbeddingService` holds an encoder (usually cached) and a fitted method
(the identity recipe for a bare encoder). It encodes texts into raw embeddings ``(n, d)`` and
derives the views the API names:

* ``"raw"``: the encoder's embedding;
* ``"meaning"``: ``model.meaning(raw, languages)``;
* ``"language"``: ``model.language(raw, languages)`` (methods with a language part).

Methods whose meaning part depends on the language (the recipe's ``uses_language``)
need a language per text; the others ignore it. Similarity and QE scores are cosines between
the meaning parts of two sides, exactly as the WMT20 QE task scores a pair
(:func:`disembed.evaluation.metrics.paired_cosine`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..encoders import Encoder
from ..evaluation.metrics import paired_cosine
from ..methods import Disentangler

#: the placeholder language given to methods that ignore it
ANY_LANGUAGE = "und"


class ServiceError(Exception):
    """A request the service cannot answer: ``status`` is the HTTP status to send."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.param = message, status, param


class CountingEncoder:
    """An encoder wrapper that counts calls and texts (what micro-batching saves)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.name, self.dim, self.identity = encoder.name, encoder.dim, encoder.identity
        self.calls = 0
        self.texts = 0
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        with self._lock:
            self.calls += 1
            self.texts += len(texts)
        return self.encoder.encode(texts, batch_size=batch_size)


@dataclass
class EmbeddingService:
    """The encoder + method behind the API; see the module docstring."""

    encoder: Encoder
    model: Disentangler
    label: str = ""
    batch_size: int = 64

    def __post_init__(self) -> None:
        if not self.model.is_fitted:
            self.model.dim_ = self.encoder.dim  # the identity recipe on a bare encoder
        self.counter = CountingEncoder(self.encoder)
        self._lock = threading.Lock()  # one encode at a time (the cache is not thread-safe)

    @property
    def views(self) -> list[str]:
        out = ["meaning", "raw"]
        if self.model.has_language:
            out.insert(1, "language")
        return out

    @property
    def needs_language(self) -> bool:
        """Whether the method's views depend on the language (the recipe says so)."""
        return bool(self.model.uses_language)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Raw embeddings ``(n, d) float32``, one encoder call (thread-safe)."""
        with self._lock:
            return self.counter.encode(texts, batch_size=self.batch_size)

    def languages_for(self, n: int, language: str | list[str] | None, param: str) -> list[str]:
        """One language per text, or the placeholder when the method ignores languages."""
        if language is None:
            if self.needs_language:
                raise ServiceError(f"{self.model.name} needs the language of every text: add "
                                   f"'{param}': \"de\" (one for all) or a list with one code per "
                                   "text", param=param)
            return [ANY_LANGUAGE] * n
        if isinstance(language, str):
            return [language] * n
        if len(language) != n:
            raise ServiceError(f"'{param}' has {len(language)} codes for {n} texts; give one "
                               "code for all or one per text", param=param)
        return list(language)

    def view(self, raw: np.ndarray, view: str, languages: list[str]) -> np.ndarray:
        """One view of ``raw (n, d)`` for texts in ``languages`` (one code per row)."""
        if view == "raw":
            return raw
        if view == "language" and not self.model.has_language:
            raise ServiceError(f"{self.model.name} has no language part; views: {self.views}",
                               param="model")
        fn = self.model.meaning if view == "meaning" else self.model.language
        try:
            return np.asarray(fn(raw, languages), dtype=np.float32)
        except Exception as exc:  # e.g. a language the method was not fitted on
            raise ServiceError(f"{self.model.name} could not compute the {view} part: {exc}",
                               param="language") from None

    def cosines(self, a_raw: np.ndarray, b_raw: np.ndarray, a_langs: list[str],
                b_langs: list[str], view: str = "meaning") -> np.ndarray:
        """``(n,)`` cosines between the ``view`` parts of paired rows."""
        a = self.view(a_raw, view, a_langs)
        b = self.view(b_raw, view, b_langs)
        return paired_cosine(a, b).astype(np.float64)
