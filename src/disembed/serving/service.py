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

import errno
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..encoders import Encoder
from ..evaluation.metrics import paired_cosine
from ..exceptions import DisembedError
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
    #: the served model's name (``model`` in requests, ``/v1/models``); default: the label's
    #: last path part (the model folder's name, or the encoder spec)
    name: str = ""

    def __post_init__(self) -> None:
        if not self.model.is_fitted:
            self.model.dim_ = self.encoder.dim  # the identity recipe on a bare encoder
        self.counter = CountingEncoder(self.encoder)
        self.name = self.name or Path(self.label.rstrip("/")).name or self.label or \
            self.model.name
        self._dims: dict[str, int] = {}
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

    def view_dim(self, view: str) -> int:
        """The number of dimensions of ``view``'s vectors."""
        if view == "raw":
            return int(self.encoder.dim)
        probe = np.zeros((1, int(self.encoder.dim)), np.float32)
        if view not in self._dims:
            try:
                self._dims[view] = int(self.view(probe, view, self.languages_for(
                    1, None if not self.needs_language else self._any_language(), "language")
                ).shape[1])
            except ServiceError:
                self._dims[view] = int(self.encoder.dim)
        return self._dims[view]

    def _any_language(self) -> str:
        return str(next(iter(getattr(self.model, "languages_", []) or [ANY_LANGUAGE])))

    @property
    def model_ids(self) -> dict[str, str]:
        """Model id -> view: ``NAME`` is the meaning part, ``NAME:VIEW`` any other view."""
        return {(self.name if v == "meaning" else f"{self.name}:{v}"): v for v in self.views}

    def view_of(self, model: str | None, view: str | None = None) -> tuple[str, str]:
        """``(model id, view)`` for a request's ``model`` and optional ``view`` fields.

        ``model`` must be a served model id (``/v1/models``); the bare view names
        (``meaning``, ``language``, ``raw``) are accepted too, as earlier versions named the
        view there. ``view`` overrides the model id's view."""
        ids = self.model_ids
        if model is None or model in self.views:
            chosen = model or "meaning"
        elif model in ids:
            chosen = ids[model]
        else:
            raise ServiceError(f"model {model!r} is not served here; this service serves "
                               f"{', '.join(map(repr, ids))} (GET /v1/models): use one of "
                               "them, or leave 'model' out", 404, "model")
        if view is not None:
            if view not in self.views:
                raise ServiceError(f"'view' must be one of {self.views}; got {view!r}",
                                   param="view")
            chosen = view
        if chosen not in self.views:
            raise ServiceError(f"{self.model.name} has no {chosen} part; views: {self.views}",
                               param="model")
        return next(k for k, v in ids.items() if v == chosen), chosen

    def encode(self, texts: list[str]) -> np.ndarray:
        """Raw embeddings ``(n, d) float32``, one encoder call (thread-safe).

        Raises :class:`ServiceError`: 503 when the service's own resources fail (the
        embedding cache cannot be written, the disk is full), 400 when the encoder cannot
        embed a given text (e.g. an ``npy:`` encoder that does not hold it)."""
        try:
            with self._lock:
                return self.counter.encode(texts, batch_size=self.batch_size)
        except OSError as exc:
            what = {errno.EACCES: "permission denied", errno.EROFS: "read-only file system",
                    errno.ENOSPC: "no space left"}.get(exc.errno or 0, exc.strerror or str(exc))
            where = f" at {exc.filename}" if getattr(exc, "filename", None) else ""
            raise ServiceError(f"the service cannot use its embedding cache{where}: {what}. "
                               "This is the server's fault, not the request's: the operator "
                               "must fix the cache folder (--cache-dir) or start the service "
                               "with --no-cache", 503) from None
        except DisembedError as exc:
            raise ServiceError(f"the encoder cannot embed these texts: {exc}",
                               param="input") from None

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
