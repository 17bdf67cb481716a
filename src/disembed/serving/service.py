"""What the HTTP service computes, without HTTP: views of embeddings, similarities, QE scores.

An :class:`EmbeddingService` holds an encoder (usually cached) and a fitted method
(the identity recipe for a bare encoder). It encodes texts into raw embeddings ``(n, d)`` and
derives the views the API names:

* ``"raw"``: the encoder's embedding;
* ``"meaning"``: ``model.meaning(raw, languages)``;
* ``"language"``: ``model.language(raw, languages)`` (methods with a language part).

Methods whose meaning part depends on the language (the recipe's ``uses_language``)
need a language per text; the others ignore it. Every view goes through the library's one
text path (:func:`~disembed.methods.text_path.text_meaning`, :meth:`EmbeddingService.text_view`):
a text sent without a language (or with ``und``, ``mul``) is tagged with the script of the
text as the encoder saw it (a cut prefix where ``truncate`` cut it), ``und-<Script>``, so
its vector is exactly the library's
:meth:`SavedModel.meaning([text]) <disembed.saved_model.SavedModel.meaning>`: the
identifier's mixture restricted to the training languages that write that script. A client
may send ``und-Hani`` itself. Similarity and QE scores are cosines between
the meaning parts of two sides, exactly as the WMT20 QE task scores a pair
(:func:`disembed.evaluation.metrics.paired_cosine`).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.languages import known_languages, normalize_tag
from ..encoders import Encoder
from ..evaluation.metrics import paired_cosine
from ..exceptions import DisembedError
from ..hardware import rechoose_threads, set_torch_threads, small_batch_threads
from ..methods import Disentangler
from ..methods.text_path import TextMeaning, text_meaning
from ..progress import no_progress

#: the placeholder language given to methods that ignore it
ANY_LANGUAGE = "und"


def _normalize(code: object, param: str) -> str | None:
    """``code`` as the canonical code (``None`` for ``und``/``mul``: identified, as with no
    code), or a 400 naming the nearest known codes."""
    if not isinstance(code, str) or not code.strip():
        raise ServiceError(f"'{param}' must hold language codes such as \"de\"; got {code!r}",
                           param=param)
    try:
        return normalize_tag(code)
    except DisembedError:
        near = difflib.get_close_matches(code.strip().lower().replace("_", "-").split("-")[0],
                                         known_languages(), n=5, cutoff=0.5)
        hint = f"nearest known codes: {', '.join(near)}" if near else "see GET /info"
        raise ServiceError(f"unknown language code {code!r} in '{param}': not a well-formed "
                           f"code of a real language; {hint} (ISO 639-1 or 639-3, BCP-47 "
                           "such as de-DE, or FLORES such as deu_Latn)", param=param) from None


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
    #: batches of at most this many texts leave one core to the event loop (0: never, the
    #: default: with the encode workers' OpenMP teams unthrottled, two threads encode a batch
    #: of 8 faster than one, see :func:`~disembed.hardware.leave_torch_to_workers`)
    small_batch: int = 0
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
        # one encode at a time, unless the encoder says two threads may call it at once
        # (then a service's encode workers encode side by side)
        self._lock = contextlib.nullcontext() if getattr(self.encoder, "thread_safe", False) \
            else threading.Lock()

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
        if view not in self._dims:
            probe = np.zeros((1, int(self.encoder.dim)), np.float32)
            known = list(self.model.known_languages() or [ANY_LANGUAGE])
            try:
                self._dims[view] = int(self.view(probe, view, [str(known[0])]).shape[1])
            except ServiceError:
                self._dims[view] = int(self.encoder.dim)
        return self._dims[view]

    @property
    def model_ids(self) -> dict[str, str]:
        """Model id -> view: ``NAME`` is the meaning part, ``NAME:VIEW`` any other view."""
        return {(self.name if v == "meaning" else f"{self.name}:{v}"): v for v in self.views}

    def view_of(self, model: str | None, view: str | None = None) -> tuple[str, str]:
        """``(model id, view)`` for a request's ``model`` and optional ``view`` fields.

        ``model`` must be a served model id (``/v1/models``); the bare view names
        (``meaning``, ``language``, ``raw``) are accepted too, naming that view of the
        served model, unless a served id is spelled so (a model folder named ``raw``): the
        served id wins. ``view`` overrides the model id's view."""
        ids = self.model_ids
        if model in ids:  # a served id first: a model folder named "raw" serves its meaning
            chosen = ids[model]
        elif model is None or model in self.views:
            chosen = model or "meaning"
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
            with self._lock, no_progress():  # a service logs requests, never draws bars
                threads = rechoose_threads().threads  # the load changes while a service runs
                set_torch_threads(small_batch_threads(threads, len(texts), self.small_batch))
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

    def languages_for(self, n: int, language: str | list[str | None] | None, param: str
                      ) -> list[str | None]:
        """One normalised language code per text; ``None`` where none was given (predicted
        by the model when it uses a language, see :meth:`text_view`).

        Every code goes through :func:`~disembed.data.languages.normalize_language`
        (``de``, ``deu``, ``de-DE``, ``DE``, ``deu_Latn`` are one language); an unknown code
        is a 400 naming the nearest known ones."""
        if language is None:
            return [None] * n
        if isinstance(language, str):
            return [_normalize(language, param)] * n
        if len(language) != n:
            raise ServiceError(f"'{param}' has {len(language)} codes for {n} texts; give one "
                               "code for all or one per text", param=param)
        return [None if code is None else _normalize(code, param) for code in language]

    def text_view(self, texts: Sequence[str], raw: np.ndarray, view: str,
                  languages: list[str | None]) -> TextMeaning:
        """The ``view`` of ``texts`` (as the encoder saw them: cut where ``truncate`` cut
        them) whose raw embeddings are ``raw (n, d)``, with the language each text is
        reported as and its probability: the library's one text path
        (:func:`~disembed.methods.text_path.text_meaning`, one identifier pass), so a
        vector is exactly :meth:`SavedModel.meaning([text])
        <disembed.saved_model.SavedModel.meaning>`. ``languages``: one normalised code (or
        ``None``) per text (:meth:`languages_for`); ``raw`` never needs one."""
        n = len(texts)
        if view == "raw":
            return TextMeaning(raw, list(languages), [None] * n, [False] * n)
        if view == "language" and not self.model.has_language:
            raise ServiceError(f"{self.model.name} has no language part; views: {self.views}",
                               param="model")
        try:  # an untagged row is the model's mixture, never its argmax
            out = text_meaning(self.model, raw, texts, languages, part=view)
        except DisembedError as exc:  # an old model without an identifier, an unseen language
            raise ServiceError(f"{self.model.name} could not compute the {view} part of these "
                               f"texts: {exc}; add 'language': \"de\" (one for all) or a list "
                               "with one code per text", param="language") from None
        return TextMeaning(np.asarray(out.vectors, dtype=np.float32), out.languages,
                           out.probabilities, out.predicted)

    def view(self, raw: np.ndarray, view: str, languages: list[str | None]) -> np.ndarray:
        """The ``view`` of raw embeddings without their texts (a probe of its size): each
        row by its code alone, an untagged one by the identifier's whole posterior."""
        return self.text_view([""] * len(raw), raw, view, languages).vectors

    def cosines(self, a_texts: Sequence[str], b_texts: Sequence[str], a_raw: np.ndarray,
                b_raw: np.ndarray, a_langs: list[str | None], b_langs: list[str | None],
                view: str = "meaning") -> np.ndarray:
        """``(n,)`` cosines between the ``view`` parts of paired rows (:meth:`text_view`)."""
        a = self.text_view(a_texts, a_raw, view, a_langs).vectors
        b = self.text_view(b_texts, b_raw, view, b_langs).vectors
        return paired_cosine(a, b).astype(np.float64)
